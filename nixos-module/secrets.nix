# services.boxmaker.brokerd.secrets: brokerd's [[secrets]] (docs/secrets.md), the credentials
# brokerd attaches to the calls a grant names and the model never sees. Each one is, by default,
# a systemd credential: the unit gets `LoadCredential=<name>:<file>` (systemd, as root, copies
# the file into the unit's private credentials directory when the unit starts) and brokerd.toml
# gets `[[secrets]] name = "<name>"` with no file, so brokerd reads
# $CREDENTIALS_DIRECTORY/<name>. boxd passes its environment on to brokerd, so the variable
# reaches it. With loadCredential = false brokerd reads the file itself (the boxmaker user must
# own it), and a reload (SIGHUP) sees a new value, which a credential copied at start does not.
#
# The file is a string, never a Nix path: a path literal (./github) is copied into the Nix
# store, which every user of the machine can read, as soon as it is interpolated. The option
# lets a path through its type only so that an assertion can say why it is refused; the module
# itself only ever uses `toString`, which does not copy.
#
# Also here: the unit's ExecReload. brokerd runs under boxd, in the one unit; boxd has nothing
# to reload and ignores SIGHUP, so the reload signals boxd's child named brokerd, not the main
# process.
{ config, lib, pkgs, ... }:

let
  cfg = config.services.boxmaker;
  inherit (lib) mkOption mkIf types;

  secret = types.submodule {
    options = {
      file = mkOption {
        # `types.str` alone would refuse a Nix path with a type error that does not say why;
        # `types.path` lets it through to the assertion below.
        type = types.either types.str types.path;
        example = "/run/agenix/github";
        description = ''
          The file holding the secret's value, as a string ("/run/agenix/github"), never a Nix
          path (./github would be copied into the world-readable Nix store; the evaluation
          fails and says so). Typically an agenix or sops-nix secret. One final newline is
          dropped; the value must be UTF-8 and at least 8 bytes.
        '';
      };
      loadCredential = mkOption {
        type = types.bool;
        default = true;
        description = ''
          true: a systemd credential (LoadCredential=): systemd reads the file as root when the
          unit starts, so it may stay root-only; a new value needs
          `systemctl restart boxmaker`. false: brokerd reads the file itself, at start and on
          `systemctl reload boxmaker`: it must be readable by the boxmaker user and by no
          other user (agenix/sops-nix `owner = "boxmaker"`, mode 0400), and not under /home.
        '';
      };
    };
  };

  secrets = cfg.brokerd.secrets;
  names = builtins.attrNames secrets;
  credentials = lib.filter (n: secrets.${n}.loadCredential) names;

  # What the module writes for a file: the string itself (toString of a path does not copy it).
  fileOf = n: toString secrets.${n}.file;
  isNixPath = n: builtins.isPath secrets.${n}.file;
  inStore = n: builtins.hasContext (fileOf n) || lib.hasPrefix "${builtins.storeDir}/" (fileOf n);

  # The [[secrets]] entry: a credential has no file (brokerd reads $CREDENTIALS_DIRECTORY/<name>).
  render = n: { name = n; } // lib.optionalAttrs (!secrets.${n}.loadCredential) { file = fileOf n; };

  # An assertion per secret that breaks `ok`.
  each = ok: message: map (n: { assertion = ok n; message = message n; }) names;
  option = n: "services.boxmaker.brokerd.secrets.${n}";
in
{
  options.services.boxmaker.brokerd.secrets = mkOption {
    type = types.attrsOf secret;
    default = { };
    example = lib.literalExpression ''
      {
        github.file = config.age.secrets.github.path;          # "/run/agenix/github"
        mail = { file = "/run/secrets/mail"; loadCredential = false; };
      }
    '';
    description = ''
      brokerd's secrets (docs/secrets.md), by name (a-z, 0-9 and _): grants attach them as
      {secret:NAME} in an http_fetch grant's headers, an exec grant's env or an [[mcp]]
      server's env; the model never sees the values. Rendered into brokerd.toml as [[secrets]]
      and, for each with loadCredential, into the unit as LoadCredential=. With
      brokerd.configFile the LoadCredential= lines are still set: write
      `[[secrets]] name = "NAME"` into that file for each.
    '';
  };

  config = mkIf cfg.enable {
    services.boxmaker.brokerd.settings = mkIf (secrets != { }) {
      secrets = map render names;
    };

    systemd.services.boxmaker.serviceConfig = {
      # boxd's child named brokerd ($MAINPID is boxd); pkill fails when there is none, and so
      # does the reload. brokerd re-reads its secrets (docs/secrets.md, "Reloading").
      ExecReload = "${pkgs.procps}/bin/pkill --signal HUP --parent $MAINPID --exact brokerd";
    } // lib.optionalAttrs (credentials != [ ]) {
      LoadCredential = map (n: "${n}:${fileOf n}") credentials;
    };

    assertions =
      each (n: builtins.match "[a-z0-9_]+" n != null)
        (n: "${option n}: a secret's name is a-z, 0-9 and _ only (as {secret:NAME} in a grant writes it), got \"${n}\".")
      ++ each (n: !(isNixPath n))
        (n: "${option n}.file is a Nix path (${fileOf n}): Nix copies a path into the Nix store, which every user of the machine can read (a flake's files are there already). Keep the value out of the configuration's files: let agenix or sops-nix decrypt it at boot and give the file it makes as a string, e.g. file = \"/run/agenix/${n}\".")
      ++ each (n: isNixPath n || !(inStore n))
        (n: "${option n}.file is in the Nix store (${fileOf n}), which every user of the machine can read: keep the secret out of the store (agenix, sops-nix, or a root-only file) and give its path as a string.")
      ++ each (n: lib.hasPrefix "/" (fileOf n))
        (n: "${option n}.file must be an absolute path, got \"${fileOf n}\".")
      ++ each (n: secrets.${n}.loadCredential || cfg.brokerd.configFile == null)
        (n: "${option n}.loadCredential = false cannot go into services.boxmaker.brokerd.configFile: write `[[secrets]] name = \"${n}\"` and `file = \"${fileOf n}\"` into that file, or drop configFile.");
  };
}
