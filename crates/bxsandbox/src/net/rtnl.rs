//! The two rtnetlink requests the network helper makes in the namespace it just created:
//! bring the loopback up, and add a routing-policy rule. Each is acknowledged or refused by
//! the kernel before the next is sent.

use super::plan::{Action, Rule};
use netlink_packet_core::{
    NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST, NetlinkHeader, NetlinkMessage,
    NetlinkPayload,
};
use netlink_packet_route::link::{LinkFlags, LinkMessage};
use netlink_packet_route::rule::{RuleAction, RuleAttribute, RuleMessage, RulePortRange};
use netlink_packet_route::{AddressFamily, IpProtocol, RouteNetlinkMessage};
use netlink_sys::{Socket, SocketAddr, protocols::NETLINK_ROUTE};
use std::io;
use std::net::IpAddr;

/// The loopback's interface index: the first device of every network namespace.
const LOOPBACK_INDEX: u32 = 1;
/// `RT_TABLE_MAIN`.
const MAIN_TABLE: u8 = 254;

/// A netlink socket to the kernel's routing in the calling process's network namespace.
pub(crate) struct Rtnl {
    socket: Socket,
    sequence: u32,
}

impl Rtnl {
    /// Opens the socket.
    pub(crate) fn open() -> io::Result<Rtnl> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(Rtnl {
            socket,
            sequence: 0,
        })
    }

    /// Brings the loopback up (`ip link set lo up`).
    pub(crate) fn loopback_up(&mut self) -> io::Result<()> {
        let mut link = LinkMessage::default();
        link.header.index = LOOPBACK_INDEX;
        link.header.flags = LinkFlags::Up;
        link.header.change_mask = LinkFlags::Up;
        self.request(RouteNetlinkMessage::SetLink(link), 0)
    }

    /// Adds `rule` (`ip rule add priority P to NET [ipproto X dport N] lookup main|prohibit`).
    pub(crate) fn add_rule(&mut self, rule: &Rule) -> io::Result<()> {
        let mut message = RuleMessage::default();
        message.header.family = AddressFamily::Inet;
        message.header.dst_len = rule.to.prefix_len();
        message.header.action = match rule.action {
            Action::Main => RuleAction::ToTable,
            Action::Prohibit => RuleAction::Prohibit,
        };
        if rule.action == Action::Main {
            message.header.table = MAIN_TABLE;
        }
        message.attributes = vec![
            RuleAttribute::Priority(rule.priority),
            RuleAttribute::Destination(IpAddr::V4(rule.to.network())),
        ];
        if let Some((protocol, port)) = rule.port {
            message.attributes.extend([
                RuleAttribute::IpProtocol(IpProtocol::from(protocol)),
                RuleAttribute::DestinationPortRange(RulePortRange {
                    start: port,
                    end: port,
                }),
            ]);
        }
        self.request(
            RouteNetlinkMessage::NewRule(message),
            NLM_F_CREATE | NLM_F_EXCL,
        )
    }

    /// Sends one request and waits for its acknowledgement; a refusal is its errno.
    fn request(&mut self, message: RouteNetlinkMessage, flags: u16) -> io::Result<()> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        header.sequence_number = self.sequence;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(message));
        packet.finalize();
        let mut buffer = vec![0u8; packet.header.length as usize];
        packet.serialize(&mut buffer);
        self.socket.send(&buffer, 0)?;
        loop {
            let (data, _) = self.socket.recv_from_full()?;
            let mut offset = 0;
            while offset < data.len() {
                let reply = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&data[offset..])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let length = reply.header.length as usize;
                if reply.header.sequence_number == self.sequence
                    && let NetlinkPayload::Error(error) = reply.payload
                {
                    return match error.code {
                        None => Ok(()),
                        Some(_) => Err(error.to_io()),
                    };
                }
                if length == 0 {
                    break;
                }
                // Messages in one datagram start on 4-byte boundaries (NLMSG_ALIGN).
                offset += length.next_multiple_of(4);
            }
        }
    }
}
