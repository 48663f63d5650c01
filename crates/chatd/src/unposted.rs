//! Calls that wait for the owner and have no post in a room: asked while chatd was down, or
//! between loopd's event and the post when chatd was killed. A task followed again after a
//! restart gets no event for a call asked before, so at its start chatd asks loopd which calls
//! wait and posts each one of a room's session that has no post, in that room.

use crate::config::Config;
use crate::names::session_of;
use crate::posts::Waiting;
use crate::store::TakenRooms;
use crate::turn::post_call;
use matrix_sdk::Client;
use matrix_sdk::ruma::RoomId;

/// Posts every call loopd says waits, of a session of one of the `taken` rooms, that has no
/// post yet. loopd out of reach: logged, and nothing is posted (the calls can be answered
/// with `boxctl approve`).
pub async fn post_unposted(
    client: &Client,
    loopd: &boxctl::Client,
    cfg: &Config,
    taken: &TakenRooms,
    waiting: &Waiting,
) {
    let pending = match loopd.approvals().await {
        Ok(list) => list.value.approvals,
        Err(error) => {
            tracing::warn!(%error, "cannot read the waiting calls from loopd; those asked while chatd was down are not posted");
            return;
        }
    };
    for call in pending {
        let room = taken
            .keys()
            .filter_map(|id| RoomId::parse(id).ok())
            .find(|id| session_of(id, &cfg.rooms).is_ok_and(|s| s == call.session))
            .and_then(|id| client.get_room(&id));
        if let Some(room) = room {
            tracing::info!(approval = %call.id, room = %room.room_id(), "posting a call that waits with no post");
            post_call(&room, call, cfg.matrix.max_class, waiting).await;
        }
    }
}
