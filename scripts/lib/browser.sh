# Sourced by scripts/fetch-parts.sh: its browser part, Debian's chromium and chromium-driver
# (chromedriver), installed with apt-get when /usr/bin/chromium or /usr/bin/chromedriver is
# missing, for the web console's real-browser tests (tests/src/browser.rs). Installed, not
# unpacked into the cache as prometheus is: chromium needs its many shared libraries from
# Debian, and installing it starts no service. An installed pair is kept as it is; apt keeps it
# current with the rest of the system. Uses fetch-parts.sh's paths (LOGS), helpers (step, die,
# die_with_log) and state (APT_UPDATED).
# shellcheck shell=bash

# Where Debian's packages put them; `--print-paths` prints these.
CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver
BROWSER_PACKAGES=(chromium chromium-driver)

browser_ok() { [ -x "$CHROMIUM" ] && [ -x "$CHROMEDRIVER" ]; }

# The major version a `chromium --version` or `chromedriver --version` line names.
major_version() { sed -n 's/^[^0-9]*\([0-9][0-9]*\)\..*/\1/p' | head -n 1; }

# browser_versions_agree: chromedriver drives only the chromium of its own major version; a
# mismatch (one of the two from elsewhere) fails every browser test with a cryptic session
# error, so it is refused here, by name.
browser_versions_agree() {
    local browser driver
    browser=$("$CHROMIUM" --version 2>/dev/null | major_version)
    driver=$("$CHROMEDRIVER" --version 2>/dev/null | major_version)
    [ -n "$browser" ] || die "$CHROMIUM does not run ('$CHROMIUM --version' failed)"
    [ -n "$driver" ] || die "$CHROMEDRIVER does not run ('$CHROMEDRIVER --version' failed)"
    [ "$browser" = "$driver" ] ||
        die "$CHROMEDRIVER (major version $driver) cannot drive $CHROMIUM ($browser):" \
            "install both from Debian, e.g. 'apt-get install --reinstall ${BROWSER_PACKAGES[*]}'"
}

# AS_ROOT: how apt-get runs as root: directly when we are root, else through sudo when it
# needs no password (a prompt in the middle of a test run would hang it); set by
# browser_as_root, which otherwise says what to run and stops.
AS_ROOT=()
browser_as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        AS_ROOT=()
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        AS_ROOT=(sudo -n)
    else
        die "missing $CHROMIUM or $CHROMEDRIVER; install them first, e.g." \
            "'sudo apt-get install -y --no-install-recommends ${BROWSER_PACKAGES[*]}'"
    fi
}

# browser_install LOG: apt-get install of the packages, waiting (bounded) for another apt to
# let go of dpkg's lock rather than failing at once beside a parallel install.
browser_install() {
    ${AS_ROOT[@]+"${AS_ROOT[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get install -y \
        --no-install-recommends -o DPkg::Lock::Timeout=300 "${BROWSER_PACKAGES[@]}" >>"$1" 2>&1
}

ensure_browser() {
    if browser_ok; then
        browser_versions_agree
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 ||
        die "the browser part needs Debian's apt-get (it installs ${BROWSER_PACKAGES[*]})"
    browser_as_root
    local log="$LOGS/browser.log"
    : >"$log"
    step "installing ${BROWSER_PACKAGES[*]} from Debian (apt-get, ~100 MB;" \
        "missing: $CHROMIUM or $CHROMEDRIVER)"
    # The package lists are refreshed only when needed: when the install fails with the lists
    # as they are (empty in a fresh container, or naming versions the archive no longer has),
    # once per run, as need() and the prometheus part do.
    if ! browser_install "$log"; then
        [ "$APT_UPDATED" -eq 0 ] ||
            die_with_log "$log" "apt-get install ${BROWSER_PACKAGES[*]} failed"
        step "apt-get install failed; running apt-get update once and trying again"
        ${AS_ROOT[@]+"${AS_ROOT[@]}"} apt-get update >>"$log" 2>&1 ||
            die_with_log "$log" "apt-get update failed: is the Debian archive reachable?"
        APT_UPDATED=1
        browser_install "$log" ||
            die_with_log "$log" "apt-get install ${BROWSER_PACKAGES[*]} failed"
    fi
    browser_ok || die "$CHROMIUM or $CHROMEDRIVER is still missing after installing" \
        "${BROWSER_PACKAGES[*]}"
    browser_versions_agree
    step "browser ready: $CHROMIUM and $CHROMEDRIVER" \
        "($("$CHROMIUM" --version 2>/dev/null | head -n 1))"
}
