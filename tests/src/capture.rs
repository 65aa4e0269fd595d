//! A `tracing` layer that captures events, for the tests of what the retry loop and the durable
//! worker log.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};

/// One captured event: its level, message and other fields, as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event's level.
    pub level: tracing::Level,
    /// Every field, the message included, as text.
    pub fields: BTreeMap<String, String>,
}

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Event>>>);

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: tracing::Subscriber> Layer<S> for Capture {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(Event {
            level: *event.metadata().level(),
            fields,
        });
    }
}

/// Runs `body` with a capturing subscriber and returns the events it emitted.
pub async fn events<F: Future<Output = ()>>(body: F) -> Vec<Event> {
    let capture = Capture::default();
    let _guard =
        tracing::subscriber::set_default(tracing_subscriber::registry().with(capture.clone()));
    body.await;
    capture.0.lock().unwrap().clone()
}
