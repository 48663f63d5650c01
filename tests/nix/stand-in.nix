# What a NixOS system gives nixos-module/default.nix beyond nixpkgs' lib, so the module can be
# evaluated offline with the real lib (tests/nix/nixpkgs-lib): the few NixOS option
# declarations it sets (systemd services, users, environment, assertions, warnings; and the
# firewall's ports, which it must not set), declared
# with the real lib.types, and a small `pkgs`. The module system, option types and merging are
# lib's own; only these declarations and packages stand in for nixpkgs.
{ lib, binDir, withBoxmaker ? true }:
let
  inherit (lib) mkOption types;
  inherit (builtins) attrNames concatStringsSep isAttrs isList isString isBool isInt isFloat
    filter match toJSON all;

  # What systemd can be given: NixOS's own unitOption takes anything and fails when the unit is
  # rendered, so this is stricter than NixOS (a null here is a bug in the module either way).
  unitAtom = types.oneOf [ types.bool types.int types.str types.path types.package ];

  nixosModule = {
    options = {
      # As NixOS's: the module's maintainers (its manual lists them).
      meta.maintainers = mkOption {
        type = types.listOf types.raw;
        default = [ ];
        description = "The maintainers of the module.";
      };
      assertions = mkOption {
        type = types.listOf types.unspecified;
        default = [ ];
        description = "As NixOS's: checked before the system is built (see eval.nix).";
      };
      warnings = mkOption {
        type = types.listOf types.str;
        default = [ ];
        description = "As NixOS's: printed when the system is built.";
      };
      # Declared so the checks can see that the module leaves it alone (metrics stay local)
      # unless rpcWorker.openFirewall asks.
      networking.firewall.allowedTCPPorts = mkOption {
        type = types.listOf types.port;
        default = [ ];
        description = "Ports the firewall opens.";
      };
      environment.systemPackages = mkOption {
        type = types.listOf types.package;
        default = [ ];
        description = "Packages on the system path.";
      };
      users.groups = mkOption {
        type = types.attrsOf (types.submodule { });
        default = { };
        description = "Groups (no option of NixOS's is set by the module).";
      };
      users.users = mkOption {
        type = types.attrsOf (types.submodule {
          options = {
            isSystemUser = mkOption { type = types.bool; default = false; description = "A system user."; };
            group = mkOption { type = types.str; default = ""; description = "Primary group."; };
            home = mkOption { type = types.passwdEntry types.path; default = "/var/empty"; description = "Home directory."; };
            description = mkOption { type = types.passwdEntry types.str; default = ""; description = "GECOS."; };
          };
        });
        default = { };
        description = "Users.";
      };
      systemd.services = mkOption {
        type = types.attrsOf (types.submodule {
          options = {
            description = mkOption { type = types.str; default = ""; description = "Description=."; };
            wantedBy = mkOption { type = types.listOf types.str; default = [ ]; description = "WantedBy=."; };
            after = mkOption { type = types.listOf types.str; default = [ ]; description = "After=."; };
            wants = mkOption { type = types.listOf types.str; default = [ ]; description = "Wants=."; };
            path = mkOption { type = types.listOf (types.either types.package types.str); default = [ ]; description = "Packages whose bin/ (and sbin/) are on the unit's PATH."; };
            environment = mkOption { type = types.attrsOf types.str; default = { }; description = "Environment= of the unit."; };
            serviceConfig = mkOption {
              type = types.attrsOf (types.either unitAtom (types.listOf unitAtom));
              default = { };
              description = "The [Service] section.";
            };
          };
        });
        default = { };
        description = "systemd services.";
      };
    };
  };

  # A small TOML writer: scalars, arrays, tables, arrays of tables (inline tables inside).
  bare = k: match "[A-Za-z0-9_-]+" k != null;
  key = k: if bare k then k else toJSON k;
  isTableList = v: isList v && v != [ ] && all isAttrs v;
  value = v:
    if isString v then toJSON v
    else if isBool v then (if v then "true" else "false")
    else if isInt v || isFloat v then toString v
    else if isList v then "[" + concatStringsSep ", " (map value v) + "]"
    else if isAttrs v && v ? outPath then toJSON "${v}"
    else if isAttrs v then "{ " + concatStringsSep ", " (map (k: "${key k} = ${value v.${k}}") (attrNames v)) + " }"
    else throw "stand-in toTOML: unsupported value";
  isTable = v: isAttrs v && !(v ? outPath);
  table = path: attrs:
    let
      names = attrNames attrs;
      scalars = filter (k: !(isTable attrs.${k}) && !(isTableList attrs.${k})) names;
      tables = filter (k: isTable attrs.${k}) names;
      tableLists = filter (k: isTableList attrs.${k}) names;
      p = k: if path == "" then key k else "${path}.${key k}";
    in
    concatStringsSep "" (map (k: "${key k} = ${value attrs.${k}}\n") scalars)
    + concatStringsSep "" (map (k: "\n[${p k}]\n" + table (p k) attrs.${k}) tables)
    + concatStringsSep "" (map (k: concatStringsSep "" (map (e:
        "\n[[${p k}]]\n" + concatStringsSep "" (map (n: "${key n} = ${value e.${n}}\n") (attrNames e))) attrs.${k})) tableLists);

  # Derivation-shaped, so types.package takes them; nothing is built.
  fake = name: { type = "derivation"; outPath = "/nix/store/00000000000000000000000000000000-${name}"; inherit name; };

  pkgs = {
    llama-cpp = fake "llama-cpp";
    bubblewrap = fake "bubblewrap";
    slirp4netns = fake "slirp4netns";
    procps = fake "procps";
    coreutils = fake "coreutils";
    tzdata = fake "tzdata";
    # As nixpkgs' fetchurl: a fixed-output derivation, with its passthru on the result.
    fetchurl = { name, url, sha256, passthru ? { } }: fake name // { inherit url sha256; } // passthru;
    formats.toml = _: {
      # nixpkgs' pkgs.formats.toml type (pkgs/pkgs-lib/formats.nix): no null, unlike JSON's.
      type =
        let
          valueType = types.oneOf [
            types.bool
            types.int
            types.float
            types.str
            types.path
            (types.attrsOf valueType)
            (types.listOf valueType)
          ] // { description = "TOML value"; };
        in
        valueType;
      generate = name: v: builtins.toFile name (table "" v);
    };
    # A real file (--read-write-mode), so the checks can read the script the module wrote.
    writeShellScript = name: text: builtins.toFile name "#!/bin/sh\n${text}";
    # Keeps the script, so the checks can run it (with $out set) against the debug build.
    runCommand = name: env: script: fake name // { inherit env script; };
  } // lib.optionalAttrs withBoxmaker {
    # What the flake's overlay adds; left out to evaluate the module without it.
    boxmaker = { type = "derivation"; outPath = binDir; name = "boxmaker"; };
  };
in
{
  inherit nixosModule pkgs;
}
