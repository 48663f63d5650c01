//! Who may speak to the box through Matrix: only the configured owners, in rooms an owner
//! invited the bot to (or the config lists), from devices that are verified where the room is
//! encrypted. Everything else never becomes a task. Pure decisions, so each is tested alone.

use matrix_sdk::ruma::{OwnedUserId, UserId};

/// How a message reached the bot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sent {
    /// In a room without encryption.
    Plain,
    /// Encrypted, from `device`, which the bot has or has not verified.
    Encrypted {
        /// The sending device's id, when known.
        device: Option<String>,
        /// Whether the bot trusts that device.
        verified: bool,
    },
}

/// What becomes of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It is the owner's task.
    Task,
    /// The owner wrote it from a device the bot does not trust: refused, with why.
    Refused(String),
    /// Someone else's, in a room the owner shares with them: never a task.
    NotOwner,
    /// Nothing for the box (the bot's own message, a room the owner did not invite it to).
    Ignored,
}

/// The bot's own id and its owners'.
#[derive(Debug, Clone)]
pub struct Policy {
    bot: OwnedUserId,
    owners: Vec<OwnedUserId>,
}

impl Policy {
    /// The policy of the bot `bot` obeying `owners`.
    pub fn new(bot: OwnedUserId, owners: Vec<OwnedUserId>) -> Policy {
        Policy { bot, owners }
    }

    /// The bot's own id.
    pub fn bot(&self) -> &UserId {
        &self.bot
    }

    /// Whether `user` is an owner.
    pub fn is_owner(&self, user: &UserId) -> bool {
        self.owners.iter().any(|owner| owner == user)
    }

    /// Whether to join a room `inviter` invited the bot to: only an owner's invitation (or
    /// one to a room the config lists) is taken. `Err` says why not, for the log.
    pub fn invitation(&self, inviter: Option<&UserId>, listed: bool) -> Result<(), String> {
        match inviter {
            _ if listed => Ok(()),
            Some(inviter) if self.is_owner(inviter) => Ok(()),
            Some(inviter) => Err(format!("{inviter} is not an owner")),
            None => Err("the invitation names no inviter".into()),
        }
    }

    /// What becomes of a message from `sender`, sent as `sent`, in a room the bot joined on an
    /// owner's invitation (`room_taken`) or not.
    pub fn message(&self, sender: &UserId, room_taken: bool, sent: &Sent) -> Verdict {
        if sender == self.bot || !room_taken {
            return Verdict::Ignored;
        }
        if !self.is_owner(sender) {
            return Verdict::NotOwner;
        }
        match sent {
            Sent::Plain | Sent::Encrypted { verified: true, .. } => Verdict::Task,
            Sent::Encrypted {
                device,
                verified: false,
            } => Verdict::Refused(format!(
                "this message came from a device the box has not verified ({}); verify it \
                 as docs/chat.md says, then send the task again",
                device.as_deref().unwrap_or("unknown device")
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn user(id: &str) -> OwnedUserId {
        UserId::parse(id).unwrap()
    }

    fn policy() -> Policy {
        Policy::new(user("@box:hs"), vec![user("@owner:hs")])
    }

    #[test]
    fn only_an_owners_invitation_is_taken_unless_the_room_is_listed() {
        let p = policy();
        assert!(p.invitation(Some(&user("@owner:hs")), false).is_ok());
        let err = p
            .invitation(Some(&user("@stranger:hs")), false)
            .unwrap_err();
        assert!(err.contains("@stranger:hs is not an owner"), "{err}");
        assert!(p.invitation(None, false).is_err());
        assert!(p.invitation(Some(&user("@stranger:hs")), true).is_ok());
    }

    #[test]
    fn only_an_owners_message_in_a_taken_room_is_a_task() {
        let p = policy();
        let (owner, stranger) = (user("@owner:hs"), user("@stranger:hs"));
        assert_eq!(p.message(&owner, true, &Sent::Plain), Verdict::Task);
        assert_eq!(p.message(&stranger, true, &Sent::Plain), Verdict::NotOwner);
        assert_eq!(p.message(&owner, false, &Sent::Plain), Verdict::Ignored);
        assert_eq!(
            p.message(&user("@box:hs"), true, &Sent::Plain),
            Verdict::Ignored
        );
        // A look-alike id is not the owner.
        assert_eq!(
            p.message(&user("@owner:hs.evil"), true, &Sent::Plain),
            Verdict::NotOwner
        );
    }

    #[test]
    fn an_owners_unverified_device_is_refused_in_an_encrypted_room() {
        let p = policy();
        let owner = user("@owner:hs");
        let verified = Sent::Encrypted {
            device: Some("PHONE".into()),
            verified: true,
        };
        assert_eq!(p.message(&owner, true, &verified), Verdict::Task);
        let unverified = Sent::Encrypted {
            device: Some("LAPTOP".into()),
            verified: false,
        };
        match p.message(&owner, true, &unverified) {
            Verdict::Refused(why) => assert!(why.contains("LAPTOP"), "{why}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        let stranger = Sent::Encrypted {
            device: None,
            verified: true,
        };
        assert_eq!(
            p.message(&user("@x:hs"), true, &stranger),
            Verdict::NotOwner
        );
    }
}
