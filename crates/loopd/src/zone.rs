//! Time zones by IANA name (`Europe/Berlin`), read from the system's time-zone database, as
//! chrono [`TimeZone`]s for schedules and the budget's days.
//!
//! Decision: the rules come from the system's TZif files (`$TZDIR`, else `/usr/share/zoneinfo`,
//! `/etc/zoneinfo` (NixOS), `/share/zoneinfo`), parsed by `tz-rs`, not from a database compiled
//! into loopd. A compiled-in database (`chrono-tz`) cost loopd some 2 MB of resident memory in
//! a position-independent executable: its tables hold one pointer per clock change, so every
//! page of them is written by the loader at start, used or not. The system's files also follow
//! the distribution's tzdata updates without a new loopd. `UTC` (and `Etc/UTC`) needs no file.
//! A zone is read once per process and kept (a tzdata update takes effect at loopd's restart);
//! a name that is not a zone in the database is a config error naming where it was looked for.

use chrono::{
    FixedOffset, MappedLocalTime, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Utc,
};
use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// The largest zone file read, in bytes (the largest in tzdata are a few KB).
const MAX_ZONE_FILE_BYTES: u64 = 256 * 1024;
/// The longest zone name accepted, in bytes (the longest in tzdata has 32).
const MAX_ZONE_NAME_BYTES: usize = 64;
/// Zones kept once read; more distinct names than this in one config are read each time.
const MAX_KEPT_ZONES: usize = 64;
/// Where the database is looked for after `$TZDIR`, in order.
const ZONEINFO_DIRS: &[&str] = &["/usr/share/zoneinfo", "/etc/zoneinfo", "/share/zoneinfo"];
/// How far either side of a local time its offsets are looked for, in seconds: clock changes
/// are months apart, and no offset differs from UTC by a day.
const PROBE_SECS: i64 = 86_400;

/// An IANA time zone and its rules. Cheap to clone; equal when the names are.
#[derive(Clone)]
pub struct Zone(Arc<Rules>);

/// A zone's name and rules.
struct Rules {
    name: String,
    tz: tz::TimeZone,
}

impl Zone {
    /// UTC, which needs no file.
    pub fn utc() -> Zone {
        static UTC: OnceLock<Zone> = OnceLock::new();
        UTC.get_or_init(|| Zone::with("UTC", tz::TimeZone::utc()))
            .clone()
    }

    /// The zone named `name`, read from the system's database once per process. An error says
    /// what was wrong with the name, or where it was looked for.
    pub fn named(name: &str) -> Result<Zone, String> {
        if name == "UTC" || name == "Etc/UTC" {
            return Ok(Zone::utc());
        }
        static KEPT: OnceLock<Mutex<HashMap<String, Zone>>> = OnceLock::new();
        let kept = KEPT.get_or_init(|| Mutex::new(HashMap::new()));
        if let Some(zone) = kept.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
            return Ok(zone.clone());
        }
        let zone = Zone::with(name, read_rules(name, &zoneinfo_dirs())?);
        let mut kept = kept.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() < MAX_KEPT_ZONES {
            kept.insert(name.to_owned(), zone.clone());
        }
        Ok(zone)
    }

    /// The zone's IANA name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    fn with(name: &str, tz: tz::TimeZone) -> Zone {
        Zone(Arc::new(Rules {
            name: name.to_owned(),
            tz,
        }))
    }

    /// The offset from UTC at `unix` seconds. Past what the rules can compute (years beyond
    /// any calendar loopd keeps) the offset is UTC's.
    fn offset_at(&self, unix: i64) -> FixedOffset {
        let secs = self
            .0
            .tz
            .find_local_time_type(unix)
            .map_or(0, |t| t.ut_offset());
        FixedOffset::east_opt(secs).unwrap_or(Utc.fix())
    }

    /// The offsets a local time has: none in a gap the clocks skip, two where they go back
    /// (the earlier instant first).
    fn offsets_of_local(&self, local: &NaiveDateTime) -> MappedLocalTime<FixedOffset> {
        let wall = local.and_utc().timestamp();
        let mut found: Vec<FixedOffset> = Vec::with_capacity(3);
        for probe in [wall - PROBE_SECS, wall, wall + PROBE_SECS] {
            let offset = self.offset_at(probe);
            let instant = wall - i64::from(offset.local_minus_utc());
            if self.offset_at(instant) == offset && !found.contains(&offset) {
                found.push(offset);
            }
        }
        // The larger offset reaches the same wall time at the earlier instant.
        found.sort_by_key(|o| std::cmp::Reverse(o.local_minus_utc()));
        match found.as_slice() {
            [] => MappedLocalTime::None,
            [one] => MappedLocalTime::Single(*one),
            [earlier, .., later] => MappedLocalTime::Ambiguous(*earlier, *later),
        }
    }
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Zone {}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({})", self.name())
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An offset in a [`Zone`]: the zone (so a `DateTime<Zone>` keeps its rules) and the offset.
#[derive(Clone, Debug)]
pub struct ZoneOffset {
    zone: Zone,
    fixed: FixedOffset,
}

impl Offset for ZoneOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl fmt::Display for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.fixed, f)
    }
}

impl TimeZone for Zone {
    type Offset = ZoneOffset;

    fn from_offset(offset: &ZoneOffset) -> Zone {
        offset.zone.clone()
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> MappedLocalTime<ZoneOffset> {
        self.offset_from_local_datetime(&local.and_time(NaiveTime::MIN))
    }

    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> MappedLocalTime<ZoneOffset> {
        self.offsets_of_local(local).map(|fixed| ZoneOffset {
            zone: self.clone(),
            fixed,
        })
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> ZoneOffset {
        self.offset_from_utc_datetime(&utc.and_time(NaiveTime::MIN))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> ZoneOffset {
        ZoneOffset {
            zone: self.clone(),
            fixed: self.offset_at(utc.and_utc().timestamp()),
        }
    }
}

/// What a config says when `name` is not a zone.
fn not_a_zone(name: &str, why: &str) -> String {
    format!("{name:?} is not an IANA time zone name like \"Europe/Berlin\" or \"UTC\": {why}")
}

/// Whether `name` can be a zone's name: relative, components of letters, digits and `_-+.`,
/// none of them `.` or `..`, so it can never name a file outside the database.
fn check_name(name: &str) -> Result<(), String> {
    let component_ok = |c: &str| {
        !c.is_empty()
            && c != "."
            && c != ".."
            && c.chars()
                .all(|ch| ch.is_ascii_alphanumeric() || "_-+.".contains(ch))
    };
    if name.len() > MAX_ZONE_NAME_BYTES || !name.split('/').all(component_ok) {
        return Err(not_a_zone(
            name,
            "a zone's name is like Area/City, of letters, digits and _-+.",
        ));
    }
    Ok(())
}

/// The directories the database is looked for in: `$TZDIR` first where it is set.
fn zoneinfo_dirs() -> Vec<PathBuf> {
    let from_env = std::env::var_os("TZDIR").filter(|dir| !dir.is_empty());
    from_env
        .into_iter()
        .map(PathBuf::from)
        .chain(ZONEINFO_DIRS.iter().map(PathBuf::from))
        .collect()
}

/// The rules of zone `name` from the first of the database directories `dirs` that has its
/// file.
fn read_rules(name: &str, dirs: &[PathBuf]) -> Result<tz::TimeZone, String> {
    check_name(name)?;
    for dir in dirs {
        let path = dir.join(name);
        let file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(not_a_zone(name, &format!("{}: {e}", path.display()))),
        };
        let mut bytes = Vec::new();
        file.take(MAX_ZONE_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| not_a_zone(name, &format!("{}: {e}", path.display())))?;
        if bytes.len() as u64 > MAX_ZONE_FILE_BYTES {
            return Err(not_a_zone(
                name,
                &format!(
                    "{} is larger than {MAX_ZONE_FILE_BYTES} bytes",
                    path.display()
                ),
            ));
        }
        return tz::TimeZone::from_tz_data(&bytes).map_err(|e| {
            not_a_zone(
                name,
                &format!("{} is not a time-zone file ({e})", path.display()),
            )
        });
    }
    let looked: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    Err(not_a_zone(
        name,
        &format!(
            "no such zone in the system's time-zone database (looked in {}; is tzdata \
             installed? TZDIR names another place)",
            looked.join(", ")
        ),
    ))
}

#[cfg(test)]
mod tests;
