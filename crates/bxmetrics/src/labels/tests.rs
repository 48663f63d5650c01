//! Unit tests of [`super::BoundedLabels`].
#![allow(clippy::unwrap_used)]

use super::*;
use std::sync::Arc;

#[test]
fn names_pass_until_the_limit_then_are_other() {
    let labels = BoundedLabels::new(2);
    assert_eq!(labels.label("a"), "a");
    assert_eq!(labels.label("b"), "b");
    assert_eq!(labels.label("c"), OTHER_LABEL);
    // A name seen before the limit keeps its own value.
    assert_eq!(labels.label("a"), "a");
    assert_eq!(labels.label("b"), "b");
    assert_eq!(labels.label("d"), OTHER_LABEL);
}

#[test]
fn no_limit_is_all_other() {
    let labels = BoundedLabels::new(0);
    assert_eq!(labels.label("a"), OTHER_LABEL);
}

#[test]
fn names_from_many_threads_take_at_most_the_limit() {
    const THREADS: usize = 8;
    const NAMES_PER_THREAD: usize = 100;
    let labels = Arc::new(BoundedLabels::new(MAX_TOOL_LABEL_VALUES));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let labels = Arc::clone(&labels);
            std::thread::spawn(move || {
                (0..NAMES_PER_THREAD)
                    .map(|i| labels.label(&format!("t{t}_{i}")).to_owned())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let values: HashSet<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    assert!(values.contains(OTHER_LABEL));
    assert_eq!(values.len(), MAX_TOOL_LABEL_VALUES + 1, "{values:?}");
}
