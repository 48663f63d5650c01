//! Whether boxctl styles its output (today only the model's reasoning, dimmed), by the
//! conventions clap's own help and errors follow (they go through `anstream`): `NO_COLOR`
//! set to anything but the empty string turns styling off (no-color.org) and wins over the
//! rest; `CLICOLOR_FORCE` (set, not `0`) turns it on off a terminal; `CLICOLOR=0` turns it
//! off; otherwise a terminal gets it and anything else does not.

use std::ffi::OsString;
use std::io::{self, IsTerminal};

/// Whether to style output to a stream, `is_terminal` saying whether it is one and `var`
/// reading the environment.
pub fn colour_wanted(is_terminal: bool, var: impl Fn(&str) -> Option<OsString>) -> bool {
    let set = |name: &str| var(name).filter(|value| !value.is_empty());
    if set("NO_COLOR").is_some() {
        return false;
    }
    if set("CLICOLOR_FORCE").is_some_and(|value| value != "0") {
        return true;
    }
    if set("CLICOLOR").is_some_and(|value| value == "0") {
        return false;
    }
    is_terminal
}

/// Whether to style what goes to this process's stdout.
pub fn stdout_colour() -> bool {
    colour_wanted(io::stdout().is_terminal(), |name| std::env::var_os(name))
}

#[cfg(test)]
mod tests {
    use super::colour_wanted;
    use std::ffi::OsString;

    fn with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            vars.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn colour_only_on_a_terminal_by_default() {
        assert!(colour_wanted(true, with(&[])));
        assert!(!colour_wanted(false, with(&[])));
    }

    #[test]
    fn colour_no_color_with_any_value_turns_it_off_even_when_forced() {
        for value in ["1", "0", "false", "yes"] {
            assert!(
                !colour_wanted(true, with(&[("NO_COLOR", value)])),
                "{value}"
            );
            let forced = [("NO_COLOR", value), ("CLICOLOR_FORCE", "1")];
            assert!(!colour_wanted(true, with(&forced)), "{value}");
        }
        // An empty NO_COLOR is as if unset (no-color.org).
        assert!(colour_wanted(true, with(&[("NO_COLOR", "")])));
    }

    #[test]
    fn colour_clicolor_force_and_clicolor() {
        assert!(colour_wanted(false, with(&[("CLICOLOR_FORCE", "1")])));
        assert!(!colour_wanted(false, with(&[("CLICOLOR_FORCE", "0")])));
        assert!(!colour_wanted(true, with(&[("CLICOLOR", "0")])));
        assert!(colour_wanted(true, with(&[("CLICOLOR", "1")])));
    }
}
