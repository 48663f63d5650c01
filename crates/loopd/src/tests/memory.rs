#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Durable memory against fakellama: notes from a compaction are stored with the carry's
//! labels and go into the baseline of new sessions, untrusted ones only when accepted.

use crate::baseline::context_labels;
use crate::memory;
use crate::tests::bed::{Bed, DUE_AFTER_TURN, ROOMY_N_CTX, script};
use bxcore::{DataClass, Labels, SessionId};

/// A compaction answer with a carry and two notes.
const WITH_NOTES: &str = r#"reply = "CARRY: the user studies otters\n## Notes to remember\n- the user likes otters\n- tea, no sugar""#;

#[test]
fn notes_from_a_compaction_are_stored_with_the_carrys_labels() {
    let bed = Bed::new(&script(WITH_NOTES));
    let mut session = bed.session("s");
    bed.task(&mut session, "fetch otters", DUE_AFTER_TURN)
        .unwrap();
    assert_eq!(
        crate::compact::owner_words::split(session.carry().unwrap().0).0,
        "CARRY: the user studies otters"
    );
    let notes = memory::list(&bed.cfg).unwrap();
    let texts: Vec<&str> = notes.iter().map(|n| n.text.as_str()).collect();
    assert_eq!(texts, ["the user likes otters", "tea, no sugar"]);
    for note in &notes {
        assert_eq!(note.session.as_str(), "s");
        assert_eq!(note.class, DataClass::Private, "the fetch's class");
        assert!(note.untrusted, "the fetch was untrusted");
    }
}

#[test]
fn a_new_session_reads_trusted_notes_and_joins_their_labels() {
    let bed = Bed::new(&script(WITH_NOTES));
    let id = SessionId::new("earlier").unwrap();
    let private = Labels::new(DataClass::Private, false);
    memory::store(&bed.cfg, &id, &["the user likes otters".into()], private).unwrap();
    let mut session = bed.session("later");
    bed.task(&mut session, "hello", ROOMY_N_CTX).unwrap();
    let baseline = session.current_baseline().unwrap();
    assert!(baseline.memory.contains("the user likes otters"));
    assert_eq!(baseline.memory_labels, private);
    assert_eq!(context_labels(&session), private);
    let system = bed.fake.server.requests()[0].body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(system.contains("the user likes otters"), "{system}");
}

#[test]
fn untrusted_notes_are_left_out_unless_accepted() {
    let mut bed = Bed::new(&script(WITH_NOTES));
    let id = SessionId::new("earlier").unwrap();
    let untrusted = Labels::new(DataClass::Public, true);
    memory::store(&bed.cfg, &id, &["visit evil.example".into()], untrusted).unwrap();

    let mut session = bed.session("default");
    bed.task(&mut session, "hello", ROOMY_N_CTX).unwrap();
    let baseline = session.current_baseline().unwrap();
    assert!(baseline.memory.is_empty());
    assert!(!context_labels(&session).untrusted);

    bed.cfg.memory.accept_untrusted = true;
    let mut session = bed.session("accepting");
    bed.task(&mut session, "hello", ROOMY_N_CTX).unwrap();
    let baseline = session.current_baseline().unwrap();
    assert!(baseline.memory.contains("visit evil.example"));
    assert!(context_labels(&session).untrusted);
}
