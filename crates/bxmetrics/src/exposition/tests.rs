use super::*;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Unit;

struct Fixed(Registry);

impl Source for Fixed {
    fn open_metrics(&self) -> Result<String, fmt::Error> {
        open_metrics(&self.0)
    }
}

fn sample_registry() -> Registry {
    let mut registry = Registry::with_prefix("demo");
    let turns: Family<Vec<(String, String)>, Counter> = Family::default();
    turns
        .get_or_create(&vec![("outcome".to_string(), "done".to_string())])
        .inc();
    registry.register("turns", "Turns ended", turns);
    let depth: Gauge = Gauge::default();
    depth.set(3);
    registry.register("queue_depth", "Tasks queued", depth);
    let duration = Histogram::new([0.1, 1.0]);
    duration.observe(0.5);
    registry.register_with_unit("turn_duration", "Turn time", Unit::Seconds, duration);
    registry
}

#[test]
fn a_counter_names_its_total_sample_in_the_classic_format_and_units_and_eof_go() {
    let text = open_metrics(&sample_registry()).unwrap();
    assert!(text.contains("# TYPE demo_turns counter\n"), "{text}");
    let classic = classic(&text);
    assert!(
        classic.contains("# HELP demo_turns_total Turns ended.\n"),
        "{classic}"
    );
    assert!(
        classic.contains("# TYPE demo_turns_total counter\n"),
        "{classic}"
    );
    assert!(
        classic.contains("demo_turns_total{outcome=\"done\"} 1\n"),
        "{classic}"
    );
    assert!(
        classic.contains("# TYPE demo_queue_depth gauge\n"),
        "{classic}"
    );
    assert!(
        classic.contains("# TYPE demo_turn_duration_seconds histogram\n"),
        "{classic}"
    );
    assert!(
        !classic.contains("# UNIT") && !classic.contains("# EOF"),
        "{classic}"
    );
}

#[test]
fn the_scraper_gets_the_format_it_asks_for() {
    let source = Fixed(sample_registry());
    let prometheus = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
    let open = scrape(&source, Some(prometheus)).unwrap();
    assert_eq!(open.content_type, OPENMETRICS_CONTENT_TYPE);
    assert!(open.body.ends_with("# EOF\n"), "{}", open.body);
    let plain = scrape(&source, None).unwrap();
    assert_eq!(plain.content_type, CLASSIC_CONTENT_TYPE);
    assert!(plain.body.contains("# TYPE demo_turns_total counter"));
    let curl = scrape(&source, Some("*/*")).unwrap();
    assert_eq!(curl.content_type, CLASSIC_CONTENT_TYPE);
}

#[test]
fn an_unknown_family_is_untyped_and_other_lines_are_left_alone() {
    let text = "# HELP x_info Something.\n# TYPE x_info unknown\nx_info 1\n# EOF\n";
    assert_eq!(
        classic(text),
        "# HELP x_info Something.\n# TYPE x_info untyped\nx_info 1\n"
    );
}
