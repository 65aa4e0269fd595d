//! No import circle and no module loop inside any crate of the workspace.
//!
//! The graph: one node per `.rs` file of a crate's `src/` (its module path read from the file's
//! path: `durable/worker/execution/attempt.rs` is `durable::worker::execution::attempt`, a folder's `mod.rs` is the
//! folder). An edge A → B when file A names an item *defined* in file B:
//!
//! - through a `use` line or a path in code that starts with `crate::`, `$crate::`, `super::`,
//!   `self::` or the name of one of the module's own children (`use page::Cursor` in
//!   `inspector/mod.rs`);
//! - a name reached through another module's `use` is followed to where it is defined, so
//!   `crate::durable::Error` (re-exported by `durable/mod.rs`) is an edge to `durable/error.rs`;
//!   a name imported twice (`Classify`, the trait and the derive macro of another crate) is
//!   followed to the one defined here;
//! - a `pub use` re-export is not an edge of the file that re-exports (a facade is a door: it
//!   names its children for the public, it does not depend on them), and `mod` lines are not
//!   edges;
//! - comments, doc comments and string literals are skipped; inline modules belong to their
//!   file, their `super::` read from where they sit;
//! - tests are not edges: an inline `#[cfg(test)] mod` (or `#[cfg(all(test, …))]`) and a test module's file (`tests.rs`,
//!   `*_tests.rs`) read what they test.
//!
//! Two checks, each printing what it finds and failing:
//!
//! - **a file circle**: a strongly connected component of more than one file;
//! - **a module loop**: for every module (a folder, or a file with children), the graph of its
//!   direct children and its own file (`mod.rs`, `name.rs`: a node too, so a loop through the
//!   parent's code counts), an edge child A → child B when any file inside A names an item
//!   defined anywhere inside B. Each loop is printed as its shortest circle, every step with
//!   the file and the item that make it (`retrier -> config: retrier/mod.rs names
//!   crate::config::effective (config/effective.rs)`), then the loop's other edges.
//!
//! Every crate root of the workspace is read, and the fleet worker binary (the one binary with
//! modules). Run it alone with `cargo test -p retry-tests --test import_cycles`; print one
//! module's graph with the ignored `print_a_module_graph` (its doc says how).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

/// A module path, `["durable", "worker", "attempt"]`.
type ModPath = Vec<String>;

/// Each file's edges: the files whose items it names.
type Edges = BTreeMap<ModPath, BTreeSet<ModPath>>;

/// One item each edge stands for, `(from, to)` → the item's path (`crate::config::effective`):
/// the first one the file names.
type Examples = BTreeMap<(ModPath, ModPath), String>;

/// One file of a crate: its module path and its code with comments and strings blanked.
struct File {
    module: ModPath,
    /// Its path below `src/`, for the messages.
    path: String,
    code: String,
}

/// A crate's files and what each module imports under which name.
struct Crate {
    files: BTreeMap<ModPath, File>,
    /// module path (file or inline module) → name → the full paths it stands for (more than
    /// one where a name is imported in two namespaces: `Classify` the trait and the derive).
    imports: HashMap<ModPath, HashMap<String, Vec<ModPath>>>,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a file below `src/`; `None` for a crate root other than `root`.
fn module_of(src: &Path, file: &Path, root: &str) -> Option<ModPath> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if parts.is_empty() && (stem == "lib" || stem == "main") {
        return (stem == root).then(Vec::new);
    }
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    Some(parts)
}

/// Blanks comments, string and char literals (keeping line structure), so paths in them are not read.
fn blank(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(if b[i] == b'\n' { b'\n' } else { b' ' });
                    i += 1;
                }
            }
        } else if c == b'r' && matches!(b.get(i + 1), Some(b'"' | b'#')) && !ident_byte(prev(b, i))
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&b'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&b'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            while j < b.len() && !b[j..].starts_with(&close) {
                if b[j] == b'\n' {
                    out.push(b'\n');
                }
                j += 1;
            }
            out.extend_from_slice(b"\"\"");
            i = j + close.len();
        } else if c == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                if b.get(i) == Some(&b'\n') {
                    out.push(b'\n');
                }
                i += 1;
            }
            out.extend_from_slice(b"\"\"");
            i += 1;
        } else if c == b'\'' && (b.get(i + 2) == Some(&b'\'') || b.get(i + 1) == Some(&b'\\')) {
            // A char literal ('x', '\n', '\u{..}'); a lifetime has no closing quote nearby.
            let mut j = i + 1;
            if b[j] == b'\\' {
                j += 1;
            }
            while j < b.len() && b[j] != b'\'' {
                j += 1;
            }
            out.extend_from_slice(b"' '");
            i = j + 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn prev(b: &[u8], i: usize) -> u8 {
    if i == 0 { b' ' } else { b[i - 1] }
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// A token stream good enough for paths: identifiers, `::`, and single punctuation.
fn tokens(code: &str) -> Vec<String> {
    let b = code.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if ident_byte(c) || c == b'$' {
            let start = i;
            i += 1;
            while i < b.len() && ident_byte(b[i]) {
                i += 1;
            }
            out.push(code[start..i].to_string());
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push("::".into());
            i += 2;
        } else {
            out.push((c as char).to_string());
            i += 1;
        }
    }
    out
}

/// One path found in a file: where it was written (the module, inline modules included),
/// the segments, whether it is imported under a name, and whether it sits in a `pub use`.
struct Found {
    at: ModPath,
    path: ModPath,
    bound_as: Option<String>,
    reexport: bool,
}

/// Reads a use tree from `t[i]`, pushing each leaf path; returns the index after the tree.
fn use_tree(
    t: &[String],
    mut i: usize,
    prefix: &ModPath,
    leaves: &mut Vec<(ModPath, String)>,
) -> usize {
    let mut path = prefix.clone();
    loop {
        match t.get(i).map(String::as_str) {
            Some("{") => {
                i += 1;
                while t.get(i).is_some_and(|s| s != "}") {
                    let next = use_tree(t, i, &path, leaves);
                    // Anything else in a group (an attribute, a comma) is stepped over.
                    i = if next == i { i + 1 } else { next };
                }
                return i + 1;
            }
            Some("*") => return i + 1,
            Some(s) if s.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$') => {
                path.push(s.to_string());
                i += 1;
                if t.get(i).is_some_and(|s| s == "::") {
                    i += 1;
                    continue;
                }
                let mut name = path.last().unwrap().clone();
                if t.get(i).is_some_and(|s| s == "as") {
                    name = t[i + 1].clone();
                    i += 2;
                }
                if name == "self" {
                    path.pop();
                    name = path.last().cloned().unwrap_or_default();
                }
                leaves.push((path, name));
                return i;
            }
            _ => return i,
        }
    }
}

/// Every path a file names, with the module it was written in.
fn paths_in(file: &File, children: &BTreeSet<String>) -> Vec<Found> {
    let t = tokens(&file.code);
    let mut found = Vec::new();
    // (inline module name, brace depth at which it opened)
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < t.len() {
        let at: ModPath = file
            .module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect();
        match t[i].as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            "mod" if t.get(i + 2).is_some_and(|s| s == "{") && under_cfg_test(&t[..i]) => {
                // A test module reads what it tests: skipped to its closing brace.
                let mut open = 0usize;
                i += 2;
                while i < t.len() {
                    match t[i].as_str() {
                        "{" => open += 1,
                        "}" => {
                            open -= 1;
                            if open == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            "mod" if t.get(i + 2).is_some_and(|s| s == "{") => {
                inline.push((t[i + 1].clone(), depth));
                depth += 1;
                i += 3;
                continue;
            }
            "use" => {
                let reexport = i > 0 && (t[i - 1] == "pub" || t[i - 1] == ")");
                let mut leaves = Vec::new();
                let mut j = i + 1;
                if t.get(j).is_some_and(|s| s == "::") {
                    j += 1; // `use ::x` is an external crate
                    i = use_tree(&t, j, &Vec::new(), &mut Vec::new());
                    continue;
                }
                i = use_tree(&t, j, &Vec::new(), &mut leaves);
                for (path, name) in leaves {
                    found.push(Found {
                        at: at.clone(),
                        path,
                        bound_as: Some(name),
                        reexport,
                    });
                }
                continue;
            }
            s if (matches!(s, "crate" | "$crate" | "super" | "self") || children.contains(s))
                && t.get(i + 1).is_some_and(|n| n == "::")
                && (i == 0 || t[i - 1] != "::") =>
            {
                let mut leaves = Vec::new();
                i = use_tree(&t, i, &Vec::new(), &mut leaves);
                for (path, _) in leaves {
                    found.push(Found {
                        at: at.clone(),
                        path,
                        bound_as: None,
                        reexport: false,
                    });
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    found
}

impl Crate {
    fn load(src: &Path, root: &str) -> Crate {
        let mut paths = Vec::new();
        rs_files(src, &mut paths);
        let sources = paths.into_iter().filter_map(|path| {
            let module = module_of(src, &path, root)?;
            let rel = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            Some((module, rel, fs::read_to_string(&path).unwrap()))
        });
        Crate::of(sources)
    }

    /// A crate of these files: (module path, path below `src/`, source).
    fn of(sources: impl IntoIterator<Item = (ModPath, String, String)>) -> Crate {
        let mut files = BTreeMap::new();
        for (module, path, source) in sources {
            let stem = path.rsplit('/').next().unwrap().trim_end_matches(".rs");
            if stem == "tests" || stem.ends_with("_tests") {
                continue;
            }
            let code = blank(&source);
            files.insert(module.clone(), File { module, path, code });
        }
        Crate {
            files,
            imports: HashMap::new(),
        }
    }

    fn children(&self, module: &ModPath) -> BTreeSet<String> {
        self.files
            .keys()
            .filter(|k| k.len() == module.len() + 1 && k.starts_with(module))
            .map(|k| k.last().unwrap().clone())
            .collect()
    }

    /// A written path made absolute from the module `at` it was written in.
    fn absolute(&self, at: &ModPath, path: &ModPath) -> ModPath {
        let mut base = at.clone();
        let mut rest = path.as_slice();
        match rest.first().map(String::as_str) {
            Some("crate" | "$crate") => {
                base.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            _ => {}
        }
        base.extend(rest.iter().cloned());
        base
    }

    /// The file that defines what an absolute path names, following imports.
    fn defining_file(&self, path: &ModPath, hops: usize) -> Option<ModPath> {
        let file = (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|p| self.files.contains_key(p))?;
        if hops < 16 {
            // The deepest module (file or inline) the path reaches, and the name after it.
            for n in (file.len()..path.len()).rev() {
                let (module, name) = (&path[..n], &path[n]);
                let targets = self.imports.get(module).and_then(|m| m.get(name));
                for target in targets.into_iter().flatten() {
                    let mut next = target.clone();
                    next.extend(path[n + 1..].iter().cloned());
                    // A name that leads back to this file (a re-exported macro of another
                    // crate beside our trait of the same name) is the other namespace's.
                    if let Some(f) = self.defining_file(&next, hops + 1).filter(|f| *f != file) {
                        return Some(f);
                    }
                }
            }
        }
        Some(file)
    }

    fn edges(&mut self) -> (Edges, Examples) {
        let mut all = Vec::new();
        for file in self.files.values() {
            let children = self.children(&file.module);
            for f in paths_in(file, &children) {
                all.push((file.module.clone(), f));
            }
        }
        for (_, f) in &all {
            if let Some(name) = &f.bound_as {
                let abs = self.absolute(&f.at, &f.path);
                self.imports
                    .entry(f.at.clone())
                    .or_default()
                    .entry(name.clone())
                    .or_default()
                    .push(abs);
            }
        }
        let mut edges: Edges = BTreeMap::new();
        let mut examples = Examples::new();
        for (from, f) in &all {
            if f.reexport {
                continue;
            }
            let abs = self.absolute(&f.at, &f.path);
            if let Some(to) = self.defining_file(&abs, 0) {
                if &to != from {
                    edges.entry(from.clone()).or_default().insert(to.clone());
                    examples
                        .entry((from.clone(), to))
                        .or_insert_with(|| format!("crate::{}", abs.join("::")));
                }
            }
        }
        (edges, examples)
    }
}

/// Tarjan's strongly connected components of more than one node.
fn circles(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct State<'a> {
        edges: &'a BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: HashMap<ModPath, usize>,
        low: HashMap<ModPath, usize>,
        stack: Vec<ModPath>,
        on_stack: BTreeSet<ModPath>,
        out: Vec<Vec<ModPath>>,
    }
    fn visit(s: &mut State, v: &ModPath) {
        let n = s.index.len();
        s.index.insert(v.clone(), n);
        s.low.insert(v.clone(), n);
        s.stack.push(v.clone());
        s.on_stack.insert(v.clone());
        for w in s.edges.get(v).into_iter().flatten() {
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v.clone(), low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v.clone(), low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(&w);
                let done = &w == v;
                component.push(w);
                if done {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.out
}

fn show(m: &ModPath) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Every crate root of the workspace: its `src/` folder (below the workspace) and root file.
const ROOTS: [(&str, &str); 9] = [
    ("retry-rules/src", "lib"),
    ("retry-macro/src", "lib"),
    ("retry-runtime/src", "lib"),
    ("retry-queue/src", "lib"),
    ("retry-queue/src", "main"),
    ("fixtures/src", "lib"),
    ("examples/src", "lib"),
    ("benches/src", "lib"),
    ("tests/src", "lib"),
];

/// The fleet worker's binary has modules of its own (the other binaries are one file each).
const BIN_ROOTS: [(&str, &str); 1] = [("tests/src/bin/fleet_worker", "main")];

/// A crate root's graph: its files, their edges and an item each edge stands for.
fn graph_of(src: &str, root: &str) -> (Crate, Edges, Examples) {
    let mut krate = Crate::load(&workspace().join(src), root);
    let (edges, examples) = krate.edges();
    (krate, edges, examples)
}

/// The circles of one crate root, each with the edges that close it.
fn circles_of(src: &str, root: &str) -> (Vec<String>, Edges) {
    let (_, edges, _) = graph_of(src, root);
    (file_circles(src, root, &edges), edges)
}

fn file_circles(src: &str, root: &str, edges: &Edges) -> Vec<String> {
    circles(edges)
        .into_iter()
        .map(|component| {
            let members: BTreeSet<_> = component.iter().cloned().collect();
            let lines: Vec<String> = component
                .iter()
                .map(|m| {
                    let to: Vec<String> = edges[m].intersection(&members).map(show).collect();
                    format!("  {} -> {}", show(m), to.join(", "))
                })
                .collect();
            format!(
                "{src} ({root}): a circle of {} files\n{}",
                component.len(),
                lines.join("\n")
            )
        })
        .collect()
}

/// The node a file is in, seen from `module`: the direct child it lies in (`["config"]`), or
/// `[]` for the module's own file (its `mod.rs` or `name.rs`); `None` outside the module.
fn node_in(module: &ModPath, file: &ModPath) -> Option<ModPath> {
    if !file.starts_with(module) {
        return None;
    }
    Some(file.get(module.len()).cloned().into_iter().collect())
}

/// The module loops of a crate: for every module, the graph of its direct children (and its
/// own file) with an edge A → B when a file inside A names an item defined inside B. Each loop
/// is printed as one shortest circle, every step with the file and the item that make it, then
/// the loop's other edges.
fn module_loops(src: &str, root: &str, krate: &Crate, edges: &Edges, ex: &Examples) -> Vec<String> {
    let mut found = Vec::new();
    for module in krate.files.keys() {
        let mut graph: Edges = BTreeMap::new();
        // (node, node) → the file edge that stands for it.
        let mut why: BTreeMap<(ModPath, ModPath), (ModPath, ModPath)> = BTreeMap::new();
        for (from, tos) in edges {
            let Some(a) = node_in(module, from) else {
                continue;
            };
            for to in tos {
                match node_in(module, to) {
                    Some(b) if b != a => {
                        graph.entry(a.clone()).or_default().insert(b.clone());
                        why.entry((a.clone(), b))
                            .or_insert((from.clone(), to.clone()));
                    }
                    _ => {}
                }
            }
        }
        for component in circles(&graph) {
            let node = |n: &ModPath| match n.first() {
                Some(child) => child.clone(),
                None => format!("{}'s own file", show(module)),
            };
            let step = |a: &ModPath, b: &ModPath| {
                let (from, to) = &why[&(a.clone(), b.clone())];
                format!(
                    "    {} -> {}: {} names {} ({})",
                    node(a),
                    node(b),
                    krate.files[from].path,
                    ex[&(from.clone(), to.clone())],
                    krate.files[to].path
                )
            };
            let members: BTreeSet<ModPath> = component.iter().cloned().collect();
            let circle = shortest_circle(&graph, &members, &component[0]);
            let mut lines: Vec<String> = circle
                .iter()
                .zip(circle.iter().skip(1).chain(circle.first()))
                .map(|(a, b)| step(a, b))
                .collect();
            let on_circle: BTreeSet<(&ModPath, &ModPath)> = circle
                .iter()
                .zip(circle.iter().skip(1).chain(circle.first()))
                .collect();
            let others: Vec<String> = component
                .iter()
                .flat_map(|a| graph[a].intersection(&members).map(move |b| (a, b)))
                .filter(|edge| !on_circle.contains(edge))
                .map(|(a, b)| step(a, b))
                .collect();
            if !others.is_empty() {
                lines.push("  and the loop's other edges:".into());
                lines.extend(others);
            }
            let names: Vec<String> = circle.iter().chain(circle.first()).map(node).collect();
            found.push(format!(
                "{src} ({root}): a loop among the modules of `{}`: {}\n{}",
                show(module),
                names.join(" -> "),
                lines.join("\n")
            ));
        }
    }
    found
}

/// The shortest circle through `start` inside `members` (a strongly connected component, so
/// there is one): breadth-first from `start`'s successors back to it.
fn shortest_circle(graph: &Edges, members: &BTreeSet<ModPath>, start: &ModPath) -> Vec<ModPath> {
    let mut came_from: HashMap<ModPath, ModPath> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start.clone()]);
    while let Some(at) = queue.pop_front() {
        for next in graph.get(&at).into_iter().flatten() {
            if !members.contains(next) || came_from.contains_key(next) {
                continue;
            }
            came_from.insert(next.clone(), at.clone());
            if next == start {
                let mut circle = vec![at.clone()];
                while circle.last().unwrap() != start {
                    let before = came_from[circle.last().unwrap()].clone();
                    circle.push(before);
                }
                circle.reverse();
                return circle;
            }
            queue.push_back(next.clone());
        }
    }
    unreachable!("a strongly connected component has a circle through each member")
}

#[test]
fn no_crate_of_the_workspace_has_an_import_circle() {
    let mut report = Vec::new();
    for (src, root) in ROOTS.into_iter().chain(BIN_ROOTS) {
        report.extend(circles_of(src, root).0);
    }
    assert!(report.is_empty(), "import circles:\n{}", report.join("\n"));
}

#[test]
fn no_module_of_the_workspace_has_a_loop_among_its_children() {
    let mut report = Vec::new();
    for (src, root) in ROOTS.into_iter().chain(BIN_ROOTS) {
        let (krate, edges, examples) = graph_of(src, root);
        report.extend(module_loops(src, root, &krate, &edges, &examples));
    }
    assert!(
        report.is_empty(),
        "{} module loops:\n{}",
        report.len(),
        report.join("\n")
    );
}

/// The checker itself sees the edges it is meant to see: a re-export is followed to the file
/// that defines the item, and a circle that exists is reported.
#[test]
fn the_checker_follows_reexports_and_reports_a_known_circle() {
    let (_, edges) = circles_of("retry-runtime/src", "lib");
    let from = |s: &str| edges.get(&s.split("::").map(String::from).collect::<ModPath>());
    let path = |s: &str| s.split("::").map(String::from).collect::<ModPath>();
    // `use crate::durable::error::Error` and `crate::durable::Error` both land on error.rs.
    let worker =
        from("durable::worker::execution::attempt").expect("attempt.rs names other modules");
    assert!(worker.contains(&path("durable::error")), "{worker:?}");
    assert!(
        !worker.contains(&path("durable")),
        "a re-export is followed, not an edge: {worker:?}"
    );

    let mut toy = BTreeMap::new();
    toy.insert(path("a"), BTreeSet::from([path("b")]));
    toy.insert(path("b"), BTreeSet::from([path("c")]));
    toy.insert(path("c"), BTreeSet::from([path("a")]));
    toy.insert(path("d"), BTreeSet::from([path("a")]));
    assert_eq!(circles(&toy), vec![vec![path("a"), path("b"), path("c")]]);
}

/// A module loop that is no file circle is reported, with the file and item of each step:
/// `a/x.rs` names `b/y.rs`'s item and `b/z.rs` names `a/w.rs`'s, so the files form no circle
/// but the modules `a` and `b` lean on each other. A `pub use` facade and a test module are
/// no edges; the parent's own file is a node of its own.
#[test]
fn the_checker_reports_a_module_loop_that_is_no_file_circle() {
    let file = |path: &str, code: &str| {
        let module: ModPath = path
            .trim_end_matches(".rs")
            .trim_end_matches("/mod")
            .split('/')
            .filter(|s| *s != "lib")
            .map(String::from)
            .collect();
        (module, path.to_string(), code.to_string())
    };
    let mut krate = Crate::of([
        file("lib.rs", "mod a; mod b; mod c; pub use c::Facade;"),
        file("a/mod.rs", "mod x; mod w;"),
        file("a/x.rs", "use crate::b::y::Item;"),
        file("a/w.rs", "pub struct Thing;"),
        file("b/mod.rs", "mod y; mod z; pub use crate::a::w::Thing;"),
        file("b/y.rs", "pub struct Item;"),
        file("b/z.rs", "fn f() -> crate::a::w::Thing { todo!() }"),
        file(
            "c/mod.rs",
            "pub struct Facade; #[cfg(test)] mod tests { use crate::a::x; }",
        ),
    ]);
    let (edges, examples) = krate.edges();
    assert!(circles(&edges).is_empty(), "no file circle: {edges:?}");
    let loops = module_loops("toy", "lib", &krate, &edges, &examples);
    assert_eq!(
        loops,
        vec![
            "toy (lib): a loop among the modules of `crate`: a -> b -> a\n    \
             a -> b: a/x.rs names crate::b::y::Item (b/y.rs)\n    \
             b -> a: b/z.rs names crate::a::w::Thing (a/w.rs)"
                .to_string()
        ]
    );

    // The parent's own file is a node: `p/mod.rs` calls into `q`, `q` names `r`'s item and `r`
    // names `p`'s own type, a loop no file circle shows.
    let mut krate = Crate::of([
        file("lib.rs", "mod p;"),
        file(
            "p/mod.rs",
            "mod q; mod r; pub struct Own; fn f() { q::go(); }",
        ),
        file("p/q/mod.rs", "mod inner; pub fn go() {}"),
        file("p/q/inner.rs", "use crate::p::r::Deep;"),
        file("p/r.rs", "pub struct Deep(super::Own);"),
    ]);
    let (edges, examples) = krate.edges();
    assert!(circles(&edges).is_empty(), "no file circle: {edges:?}");
    let loops = module_loops("toy", "lib", &krate, &edges, &examples);
    assert_eq!(loops.len(), 1, "{loops:#?}");
    assert!(
        loops[0].starts_with(
            "toy (lib): a loop among the modules of `p`: p's own file -> q -> r -> p's own file"
        ),
        "{}",
        loops[0]
    );
}

/// Prints the graph of one module's children, one edge a line with the file and item that make
/// it, to plan a layering: `IMPORT_GRAPH="retry-runtime/src lib durable::worker" cargo test -p
/// retry-tests --test import_cycles -- --ignored --nocapture` (`crate` for the root).
#[test]
#[ignore = "a tool: prints the module graph IMPORT_GRAPH names"]
fn print_a_module_graph() {
    let spec =
        std::env::var("IMPORT_GRAPH").unwrap_or_else(|_| "retry-runtime/src lib crate".into());
    let mut parts = spec.split_whitespace();
    let (src, root) = (parts.next().unwrap(), parts.next().unwrap());
    let module: ModPath = match parts.next().unwrap_or("crate") {
        "crate" => Vec::new(),
        m => m.split("::").map(String::from).collect(),
    };
    let (krate, edges, examples) = graph_of(src, root);
    let mut seen = BTreeSet::new();
    for (from, tos) in &edges {
        for to in tos {
            let (Some(a), Some(b)) = (node_in(&module, from), node_in(&module, to)) else {
                continue;
            };
            if a != b && seen.insert((a.clone(), b.clone())) {
                println!(
                    "{} -> {}: {} names {}",
                    a.first().map_or("(own file)", String::as_str),
                    b.first().map_or("(own file)", String::as_str),
                    krate.files[from].path,
                    examples[&(from.clone(), to.clone())]
                );
            }
        }
    }
}

/// Whether the tokens before a `mod` end with a `#[cfg(…)]` whose predicate names `test`
/// (`#[cfg(test)]`, `#[cfg(all(test, feature = "sqlite"))]`): a test module.
fn under_cfg_test(before: &[String]) -> bool {
    if before.last().is_none_or(|t| t != "]") {
        return false;
    }
    let mut depth = 0usize;
    for (at, token) in before.iter().enumerate().rev() {
        match token.as_str() {
            "]" => depth += 1,
            "[" => {
                depth -= 1;
                if depth == 0 {
                    let attribute = &before[at.saturating_sub(1)..];
                    return attribute.first().is_some_and(|t| t == "#")
                        && attribute.get(2).is_some_and(|t| t == "cfg")
                        && attribute.iter().any(|t| t == "test");
                }
            }
            _ => {}
        }
    }
    false
}
