# Sourced by scripts/fetch-parts.sh: its prometheus part, prometheus and promtool from Debian's
# prometheus package, downloaded with `apt-get download` and unpacked into the cache, never
# installed. Uses fetch-parts.sh's pins (PROMETHEUS_DEB_*), paths (PROMETHEUS_DIR, PROMETHEUS,
# PROMTOOL, LOGS), helpers (step, die, die_with_log, sha256_of) and state (TEMPS,
# APT_UPDATED); its messages name fetch-parts.sh ($0), where the pins are.
# shellcheck shell=bash

# prometheus_ok: whether both cached binaries run.
prometheus_ok() {
    [ -x "$PROMETHEUS" ] && [ -x "$PROMTOOL" ] &&
        "$PROMTOOL" --version >/dev/null 2>&1 && "$PROMETHEUS" --version >/dev/null 2>&1
}

# apt_download LOG DIR: `apt-get download` of the pinned prometheus into DIR. Empty package
# lists (a fresh container) are the usual reason it fails: as root, `apt-get update` once and
# try again, as need() does.
apt_download() {
    local log=$1 dir=$2 spec="prometheus=$PROMETHEUS_DEB_VERSION"
    (cd "$dir" && apt-get download "$spec") >>"$log" 2>&1 && return 0
    if [ "$(id -u)" -eq 0 ] && [ "$APT_UPDATED" -eq 0 ]; then
        step "apt-get download $spec failed; running apt-get update once and trying again"
        apt-get update >>"$log" 2>&1 ||
            die_with_log "$log" "apt-get update failed: is the Debian archive reachable?"
        APT_UPDATED=1
        (cd "$dir" && apt-get download "$spec") >>"$log" 2>&1 && return 0
    fi
    die_with_log "$log" "could not download $spec from Debian (apt-get download failed;" \
        "is the Debian archive reachable, are the package lists current ('apt-get update')," \
        "and is that version still in the archive? A new one means re-pinning it in $0)"
}

ensure_prometheus() {
    prometheus_ok && return 0
    command -v apt-get >/dev/null 2>&1 && command -v dpkg-deb >/dev/null 2>&1 ||
        die "the prometheus part needs Debian's apt-get and dpkg-deb (it unpacks Debian's package)"
    local arch
    arch=$(dpkg --print-architecture 2>/dev/null || echo unknown)
    [ "$arch" = "$PROMETHEUS_DEB_ARCH" ] ||
        die "the pinned prometheus package is for $PROMETHEUS_DEB_ARCH, this machine is $arch;" \
            "pin that architecture's .deb and digest in $0"

    local log="$LOGS/prometheus.log" tmp deb digest
    : >"$log"
    mkdir -p "$(dirname "$PROMETHEUS_DIR")"
    # Beside its final place (the same file system), so the move below is a rename, not a
    # copy: the directory appears whole or not at all. The rename is not atomic over an old
    # (broken) directory, which `rm -rf` removes just before it: a run killed between the two
    # leaves no directory, and the next run fetches it again. A '.prometheus.tmp.*' name, so a
    # run killed half-way leaves nothing a later run takes for done (the cleanup under the
    # lock in fetch-parts.sh removes it).
    tmp=$(mktemp -d "$(dirname "$PROMETHEUS_DIR")/.prometheus.tmp.XXXXXX")
    TEMPS+=("$tmp")
    mkdir -p "$tmp/download" "$tmp/root"

    step "downloading Debian's prometheus $PROMETHEUS_DEB_VERSION (apt-get download, ~19 MB;" \
        "unpacked into the cache, not installed)"
    apt_download "$log" "$tmp/download"
    deb=$(find "$tmp/download" -name 'prometheus_*.deb' -print -quit)
    [ -n "$deb" ] || die_with_log "$log" "apt-get download left no prometheus_*.deb"
    digest=$(sha256_of "$deb")
    [ "$digest" = "$PROMETHEUS_DEB_SHA256" ] ||
        die "refusing $(basename "$deb"): sha256 is $digest," \
            "expected $PROMETHEUS_DEB_SHA256 (pinned in $0)"

    dpkg-deb -x "$deb" "$tmp/root" >>"$log" 2>&1 || die_with_log "$log" "could not unpack $deb"
    local b
    for b in prometheus promtool; do
        [ -x "$tmp/root/usr/bin/$b" ] || die "$(basename "$deb") has no usr/bin/$b"
        mv -- "$tmp/root/usr/bin/$b" "$tmp/$b"
        "$tmp/$b" --version >>"$log" 2>&1 || die_with_log "$log" "the unpacked $b does not run"
    done
    rm -rf -- "$tmp/download" "$tmp/root"
    chmod 755 "$tmp"
    rm -rf -- "$PROMETHEUS_DIR"
    mv -- "$tmp" "$PROMETHEUS_DIR"
    step "prometheus ready: $PROMETHEUS and $PROMTOOL ($PROMETHEUS_DEB_VERSION)"
}
