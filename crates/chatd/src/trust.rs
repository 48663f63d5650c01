//! Which of an owner's devices the bot trusts in an encrypted room: one the SDK reports as
//! verified (its owner's cross-signing identity verified), or one the config pins by its
//! ed25519 key (`[[matrix.trusted_devices]]`: the "session key" Element shows in a session's
//! details). A pin holds only while the device's key, as the bot's crypto store knows it, is
//! the pinned one, so a homeserver cannot swap a device's keys under the same id.

use crate::config::{TrustedDevice, normalise_key};
use crate::policy::Sent;
use matrix_sdk::Client;
use matrix_sdk::deserialized_responses::{TimelineEvent, VerificationState};
use matrix_sdk::ruma::UserId;

/// The pinned devices.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    pins: Vec<TrustedDevice>,
}

impl Trust {
    /// Trusting the devices `pins` names.
    pub fn new(pins: Vec<TrustedDevice>) -> Trust {
        Trust { pins }
    }

    /// The pinned key of `user`'s `device`, if it is pinned.
    pub fn pinned(&self, user: &UserId, device: &str) -> Option<String> {
        self.pins
            .iter()
            .find(|p| p.user == user.as_str() && p.device == device)
            .map(|p| normalise_key(&p.ed25519))
    }

    /// How `event`, from `sender`, reached the bot: in the clear, or encrypted from a device
    /// the bot trusts or does not.
    pub async fn sent(&self, client: &Client, sender: &UserId, event: &TimelineEvent) -> Sent {
        let Some(info) = event.encryption_info() else {
            return Sent::Plain;
        };
        let device = info.sender_device.as_ref().map(ToString::to_string);
        let verified = matches!(info.verification_state, VerificationState::Verified)
            || match (&info.sender_device, device.as_deref()) {
                (Some(id), Some(name)) => match self.pinned(sender, name) {
                    Some(pin) => self.key_is(client, sender, id, &pin).await,
                    None => false,
                },
                _ => false,
            };
        Sent::Encrypted { device, verified }
    }

    /// Whether the bot's crypto store holds `pin` as the ed25519 key of `user`'s `device`.
    async fn key_is(
        &self,
        client: &Client,
        user: &UserId,
        device: &matrix_sdk::ruma::DeviceId,
        pin: &str,
    ) -> bool {
        match client.encryption().get_device(user, device).await {
            Ok(Some(found)) => found
                .ed25519_key()
                .is_some_and(|key| key.to_base64() == pin),
            Ok(None) => false,
            Err(error) => {
                tracing::warn!(%error, "cannot read a device's keys from the crypto store");
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_pin_names_one_device_of_one_user_and_its_key_as_element_shows_it() {
        let trust = Trust::new(vec![TrustedDevice {
            user: "@me:hs".into(),
            device: "PHONE".into(),
            ed25519: "abcd EFGH ijkl".into(),
        }]);
        let me = UserId::parse("@me:hs").unwrap();
        let other = UserId::parse("@other:hs").unwrap();
        assert_eq!(trust.pinned(&me, "PHONE").as_deref(), Some("abcdEFGHijkl"));
        assert_eq!(trust.pinned(&me, "LAPTOP"), None);
        assert_eq!(trust.pinned(&other, "PHONE"), None);
    }
}
