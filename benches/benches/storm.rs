//! Storms: N clients start one request each at the same instant, on a paused tokio clock,
//! through `#[retry]` (4 attempts, pauses from 10 ms), for each jitter mode, with the default
//! retry budget and with an unlimited one. Prints the tables of BENCHMARKS.md and writes the
//! plot `benches/amplification.svg`.
//!
//! `cargo bench -p retry-benches --bench storm`

use std::path::Path;
use std::time::Duration;

use plotters::prelude::*;
use retry_benches::storm::{
    BudgetKind, Jitter, Report, Scenario, Server, Steady, SteadyReport, run, run_steady,
};

/// Callers in the failure-rate sweep.
const CLIENTS: u32 = 1_000;
/// The seed of the server's failures.
const SEED: u64 = 42;
/// Capacity of the contention model, in calls per millisecond.
const CAPACITY: u32 = 100;
/// Callers in the contention sweep.
const CONTENDING: [u32; 6] = [100, 200, 500, 1_000, 1_500, 2_000];

fn main() {
    if std::env::var_os("STORM_STEADY_ONLY").is_some() {
        return steady_tables();
    }
    let before = retry_benches::uptime();
    let rates: Vec<u32> = (0..=100).step_by(10).collect();

    // The failure-rate sweep: every (rate, jitter, budget).
    let sweep: Vec<(u32, Vec<[Report; 2]>)> = rates
        .iter()
        .map(|&percent| {
            let reports = Jitter::ALL
                .iter()
                .map(|&jitter| {
                    [BudgetKind::None, BudgetKind::Adaptive].map(|budget| {
                        run(&Scenario {
                            clients: CLIENTS,
                            server: Server::Failing(f64::from(percent) / 100.0),
                            jitter,
                            budget,
                            seed: SEED,
                        })
                    })
                })
                .collect();
            (percent, reports)
        })
        .collect();

    let triple = |reports: &[[Report; 2]], budget: usize, cell: &dyn Fn(&Report) -> String| {
        reports
            .iter()
            .map(|pair| cell(&pair[budget]))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let amp = |r: &Report| format!("{:.2}", r.amplification(CLIENTS));
    let ok = |r: &Report| format!("{:.1}", f64::from(r.succeeded) * 100.0 / f64::from(CLIENTS));
    let ms = |d: Duration| format!("{:.1}", d.as_secs_f64() * 1e3);

    println!(
        "## storm: {CLIENTS} clients, each call fails with probability p (independent of load)\n"
    );
    println!("Each cell: jitter equal / full / none.\n");
    println!(
        "| p | 1+p+p²+p³ | calls/request, no budget | calls/request, adaptive budget | requests succeeded %, no budget | requests succeeded %, adaptive budget |"
    );
    println!("| ---: | ---: | --- | --- | --- | --- |");
    for (percent, reports) in &sweep {
        let p = f64::from(*percent) / 100.0;
        println!(
            "| {percent} % | {:.2} | {} | {} | {} | {} |",
            1.0 + p + p * p + p * p * p,
            triple(reports, 0, &amp),
            triple(reports, 1, &amp),
            triple(reports, 0, &ok),
            triple(reports, 1, &ok),
        );
    }
    println!("\n### timing, no budget (virtual ms; equal / full / none)\n");
    println!(
        "| p | completion (last client done) | mean latency | peak retries in one ms | calls/request, 3 more runs of full jitter |"
    );
    println!("| ---: | --- | --- | --- | --- |");
    for (percent, reports) in &sweep {
        // The jitter is drawn from the thread's RNG: how much does one run vary?
        let again: Vec<String> = (0..3)
            .map(|_| {
                amp(&run(&Scenario {
                    clients: CLIENTS,
                    server: Server::Failing(f64::from(*percent) / 100.0),
                    jitter: Jitter::Full,
                    budget: BudgetKind::None,
                    seed: SEED,
                }))
            })
            .collect();
        println!(
            "| {percent} % | {} | {} | {} | {} |",
            triple(reports, 0, &|r| ms(r.completion)),
            triple(reports, 0, &|r| ms(r.mean_latency)),
            triple(reports, 0, &|r| r.peak_retries_per_ms.to_string()),
            again.join(" / "),
        );
    }

    println!(
        "\n## contention: the server completes at most {CAPACITY} calls per ms and fails the rest\n"
    );
    println!("Each cell: jitter equal / full / none.\n");
    println!(
        "| clients | budget | calls/request | requests succeeded % | completion ms | mean latency ms | peak retries in one ms |"
    );
    println!("| ---: | --- | --- | --- | --- | --- | --- |");
    let mut contention: Vec<(u32, Vec<[Report; 2]>)> = Vec::new();
    for clients in CONTENDING {
        let reports: Vec<[Report; 2]> = Jitter::ALL
            .iter()
            .map(|&jitter| {
                [BudgetKind::None, BudgetKind::Adaptive].map(|budget| {
                    run(&Scenario {
                        clients,
                        server: Server::Capacity { per_ms: CAPACITY },
                        jitter,
                        budget,
                        seed: SEED,
                    })
                })
            })
            .collect();
        let amp = |r: &Report| format!("{:.2}", r.amplification(clients));
        let ok = |r: &Report| format!("{:.1}", f64::from(r.succeeded) * 100.0 / f64::from(clients));
        for budget in [0, 1] {
            println!(
                "| {clients} | {} | {} | {} | {} | {} | {} |",
                if budget == 1 {
                    "adaptive (default)"
                } else {
                    "none"
                },
                triple(&reports, budget, &amp),
                triple(&reports, budget, &ok),
                triple(&reports, budget, &|r| ms(r.completion)),
                triple(&reports, budget, &|r| ms(r.mean_latency)),
                triple(&reports, budget, &|r| r.peak_retries_per_ms.to_string()),
            );
        }
        contention.push((clients, reports));
    }

    steady_tables();

    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("amplification.svg");
    plot(&path, &sweep, &contention).expect("the plot");
    println!("\nplot: {}", path.display());
    println!(
        "\nuptime before: {}\nuptime after:  {}",
        before.unwrap_or_default(),
        retry_benches::uptime().unwrap_or_default()
    );
}

/// Steady traffic: 200 requests/s for 100 s, each budget, every server model of issue 19.
fn steady_tables() {
    const PER_SEC: u32 = 200;
    const SECS: u32 = 100;
    let recovery = Duration::from_secs(30);
    let scenarios: [(&str, Server); 5] = [
        ("independent p = 30 %", Server::Failing(0.3)),
        ("independent p = 50 %", Server::Failing(0.5)),
        ("down (p = 100 %)", Server::Failing(1.0)),
        (
            "down 30 s, then p = 30 %",
            Server::DownThen {
                until: recovery,
                p: 0.3,
            },
        ),
        ("overload: 100 calls/s served", Server::PerSecond(100)),
    ];
    println!("\n## steady traffic: {PER_SEC} requests/s (Poisson) for {SECS} s, jitter full\n");
    println!(
        "Each cell: adaptive (default) / static `Budget::new(0.2, 10, 10 s)` / none. \
         \"served 1–3 s after\": requests started 1–3 s after the recovery.\n"
    );
    println!("| server | served % | calls/request | served 1–3 s after recovery % |");
    println!("| --- | --- | --- | --- |");
    let mut recovered: Vec<SteadyReport> = Vec::new();
    for (name, server) in scenarios {
        let reports = BudgetKind::ALL.map(|budget| {
            run_steady(&Steady {
                per_sec: PER_SEC,
                secs: SECS,
                server,
                budget,
                seed: SEED,
            })
        });
        let cells = |cell: &dyn Fn(&SteadyReport) -> String| {
            reports.iter().map(cell).collect::<Vec<_>>().join(" / ")
        };
        let after = if matches!(server, Server::DownThen { .. }) {
            cells(&|r| {
                format!(
                    "{:.1}",
                    r.served_between(
                        recovery + Duration::from_secs(1),
                        recovery + Duration::from_secs(3)
                    )
                )
            })
        } else {
            "—".to_owned()
        };
        println!(
            "| {name} | {} | {} | {after} |",
            cells(&|r| format!("{:.1}", r.served())),
            cells(&|r| format!("{:.3}", r.amplification())),
        );
        if matches!(server, Server::DownThen { .. }) {
            recovered = reports.to_vec();
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("recovery.svg");
    plot_recovery(&path, &recovered, recovery).expect("the recovery plot");
    println!("\nplot: {}", path.display());
}

/// Served % per 250 ms of start time around the recovery, one line per budget.
fn plot_recovery(
    path: &Path,
    reports: &[SteadyReport],
    recovery: Duration,
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (900, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let from = recovery.as_secs_f64() - 2.0;
    let to = recovery.as_secs_f64() + 6.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "200 requests/s, down until 30 s, then p = 30 %: requests served",
            ("sans-serif", 17),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(from..to, 0f64..101f64)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc("request start, s")
        .y_desc("served %, per 250 ms")
        .draw()?;
    let colours = [
        RGBColor(30, 60, 220),
        RGBColor(220, 30, 30),
        RGBColor(0, 160, 160),
    ];
    for ((report, budget), colour) in reports.iter().zip(BudgetKind::ALL).zip(colours) {
        let points: Vec<(f64, f64)> = (0..32)
            .map(|i| {
                let start = Duration::from_secs_f64(from + f64::from(i) * 0.25);
                let served = report.served_between(start, start + Duration::from_millis(250));
                (start.as_secs_f64() + 0.125, served)
            })
            .collect();
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(2)))?
            .label(budget.name())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// One curve per (jitter, budget): x and calls per request.
type Curves = Vec<(String, RGBColor, Jitter, Vec<(f64, f64)>)>;

fn curves(data: &[(u32, Vec<[Report; 2]>)], clients: impl Fn(u32) -> u32) -> Curves {
    let colours = [
        [RGBColor(220, 30, 30), RGBColor(30, 60, 220)],
        [RGBColor(240, 140, 0), RGBColor(0, 160, 160)],
        [RGBColor(150, 0, 110), RGBColor(20, 20, 110)],
    ];
    let mut curves = Vec::new();
    for (j, jitter) in Jitter::ALL.into_iter().enumerate() {
        for (b, budget) in ["no budget", "adaptive budget"].into_iter().enumerate() {
            let points = data
                .iter()
                .map(|(x, reports)| (f64::from(*x), reports[j][b].amplification(clients(*x))))
                .collect();
            curves.push((
                format!("jitter {}, {budget}", jitter.name()),
                colours[j][b],
                jitter,
                points,
            ));
        }
    }
    curves
}

/// Draws the curves, each with its marker (equal: circle, full: triangle, none: cross).
fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    x_desc: &str,
    x_range: std::ops::Range<f64>,
    curves: &Curves,
    theory: Option<Vec<(f64, f64)>>,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 17))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(x_range, 1f64..4.1f64)?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .x_desc(x_desc)
        .y_desc("calls to the server per logical request")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .draw()?;
    if let Some(theory) = theory {
        chart
            .draw_series(DashedLineSeries::new(theory, 6, 4, BLACK.stroke_width(1)))?
            .label("expected, no budget: 1 + p + p² + p³")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    }
    for (label, colour, jitter, points) in curves {
        let colour = *colour;
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        match jitter {
            Jitter::Equal => {
                chart.draw_series(points.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
            }
            Jitter::Full => {
                chart.draw_series(
                    points
                        .iter()
                        .map(|&p| TriangleMarker::new(p, 6, colour.filled())),
                )?;
            }
            Jitter::None => {
                chart.draw_series(
                    points
                        .iter()
                        .map(|&p| Cross::new(p, 5, colour.stroke_width(2))),
                )?;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 12))
        .draw()?;
    Ok(())
}

/// Retry amplification against the failure rate (left) and against contention (right), with
/// and without the budget.
fn plot(
    path: &Path,
    sweep: &[(u32, Vec<[Report; 2]>)],
    contention: &[(u32, Vec<[Report; 2]>)],
) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1300, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(560);
    let (left, right) = top.split_horizontally(680);
    let theory = (0..=100)
        .map(|percent| {
            let p = f64::from(percent) / 100.0;
            (f64::from(percent), 1.0 + p + p * p + p * p * p)
        })
        .collect();
    draw(
        &left,
        &format!("{CLIENTS} clients; each call fails with probability p"),
        "server failure rate p, % of calls",
        0f64..100f64,
        &curves(sweep, |_| CLIENTS),
        Some(theory),
    )?;
    let max_clients = f64::from(CONTENDING[CONTENDING.len() - 1]);
    draw(
        &right,
        &format!("contention: the server completes {CAPACITY} calls per ms"),
        "clients starting at once",
        0f64..max_clients,
        &curves(contention, |clients| clients),
        None,
    )?;
    bottom.draw(&Text::new(
        "#[retry(read, attempts = 4, delay = \"10ms\")] on a paused tokio clock; all clients start at t = 0. \
         Left: the three jitter modes make the same number of calls (the curves overlap). \
         Budget: the adaptive default.",
        (20, 10),
        ("sans-serif", 13),
    ))?;
    root.present()?;
    Ok(())
}
