# services.boxmaker.chat.matrix: chatd, the box's Matrix channel (docs/chat.md), in a hardened
# unit of its own, boxmaker-chat, with a user of its own. It reaches loopd as boxctl does, on
# loopd's socket, as a member of the boxmaker group; its credential comes through systemd's
# LoadCredential, never through the store.
#
# Decision: systemd supervises chatd, not boxd. boxd runs as the boxmaker user and could start
# chatd only as that user; a user of chatd's own keeps the bot's access token and end-to-end
# keys out of the daemons' reach, and theirs out of chatd's.
{ config, lib, pkgs, ... }:

let
  cfg = config.services.boxmaker;
  m = cfg.chat.matrix;
  inherit (lib) mkOption mkEnableOption mkIf types;
  toml = pkgs.formats.toml { };
  hardening = import ./hardening.nix { inherit lib; };
  inherit (import ./paths.nix) loopdSocket;

  name = "boxmaker-chat";
  stateDir = "/var/lib/${name}";
  # The credential's name in $CREDENTIALS_DIRECTORY, which chatd.toml names relatively.
  credential = if m.passwordFile != null then "matrix-password" else "matrix-token";
  credentialFile = if m.passwordFile != null then m.passwordFile else m.accessTokenFile;

  chatdFile = toml.generate "chatd.toml" ({
    loopd_socket = loopdSocket;
    state_dir = stateDir;
    log.level = "info";
    matrix = {
      inherit (m) homeserver user owners;
      max_class = m.maxClass;
      trusted_devices = m.trustedDevices;
    } // (if m.passwordFile != null then { password_file = credential; } else { access_token_file = credential; })
      // lib.optionalAttrs (m.notifyRoom != null) { notify_room = m.notifyRoom; };
    inherit (m) rooms;
  });

  # The config, checked by chatd itself at build time, like the daemons' (default.nix).
  checked = pkgs.runCommand "boxmaker-chatd-config" { } ''
    set -eu
    mkdir -p "$out"
    ${cfg.package}/bin/chatd --check-config ${chatdFile}
    cp ${chatdFile} "$out/chatd.toml"
  '';
in
{
  options.services.boxmaker.chat.matrix = {
    enable = mkEnableOption "chatd, the box's Matrix channel: the owners' messages in a room become tasks (docs/chat.md)";

    configDir = mkOption {
      type = types.package;
      readOnly = true;
      default = checked;
      defaultText = lib.literalMD "chatd.toml, rendered from these options and checked";
      description = "The checked chatd.toml (read only).";
    };

    homeserver = mkOption {
      type = types.str;
      example = "https://matrix.example.org";
      description = "The homeserver's base URL.";
    };

    user = mkOption {
      type = types.str;
      example = "@box:example.org";
      description = "The bot's Matrix user id (an account made for the box).";
    };

    passwordFile = mkOption {
      type = types.nullOr types.path;
      default = null;
      example = "/run/agenix/matrix-box-password";
      description = ''
        A file holding the bot's password, handed to the unit with LoadCredential (never
        copied into the store). Read at the first sign-in; the session is kept in the unit's
        state. Exactly one of passwordFile and accessTokenFile.
      '';
    };

    accessTokenFile = mkOption {
      type = types.nullOr types.path;
      default = null;
      description = "Instead of passwordFile: a file holding an access token of the bot's device.";
    };

    owners = mkOption {
      type = types.nonEmptyListOf types.str;
      example = [ "@me:example.org" ];
      description = "The Matrix ids the bot obeys. Nobody else's message is ever a task.";
    };

    rooms = mkOption {
      type = types.listOf (types.submodule {
        options = {
          room = mkOption { type = types.str; description = "The room's id (!abc:example.org)."; };
          session = mkOption { type = types.str; description = "The session its tasks run in."; };
        };
      });
      default = [ ];
      description = "Rooms whose tasks run in a named session; others get one session each.";
    };

    notifyRoom = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "!abcdefghij:example.org";
      description = ''
        The room loopd's notifications go to when their schedule's notify_to names none.
      '';
    };

    maxClass = mkOption {
      type = types.enum [ "public" "internal" "private" "secret" ];
      default = "private";
      description = "The highest label of an answer posted to a room; above it, the room is told to read it on the box.";
    };

    trustedDevices = mkOption {
      type = types.listOf (types.submodule {
        options = {
          user = mkOption { type = types.str; description = "The owner."; };
          device = mkOption { type = types.str; description = "The device's id (Element: the session's ID)."; };
          ed25519 = mkOption { type = types.str; description = "Its ed25519 key (Element: the session key)."; };
        };
      });
      default = [ ];
      description = "Owners' devices trusted in encrypted rooms, pinned by key (docs/chat.md).";
    };
  };

  config = mkIf (cfg.enable && m.enable) {
    assertions = [
      {
        assertion = (m.passwordFile == null) != (m.accessTokenFile == null);
        message = "services.boxmaker.chat.matrix: set exactly one of passwordFile and accessTokenFile.";
      }
    ];

    users.groups.${name} = { };
    users.users.${name} = {
      isSystemUser = true;
      group = name;
      home = stateDir;
      description = "boxmaker's Matrix channel";
    };

    systemd.services.${name} = {
      description = "boxmaker's Matrix channel (chatd) for ${m.user}";
      wantedBy = [ "multi-user.target" ];
      # loopd's socket comes with the appliance; the homeserver is usually elsewhere.
      after = [ "boxmaker.service" "network-online.target" ];
      wants = [ "network-online.target" ];
      serviceConfig = {
        ExecStart = "${cfg.package}/bin/chatd --config ${checked}/chatd.toml";
        User = name;
        Group = name;
        # loopd's socket (0660) and its directory (0750) are the boxmaker group's.
        SupplementaryGroups = [ "boxmaker" ];
        LoadCredential = [ "${credential}:${credentialFile}" ];
        # The session, sync position and end-to-end keys: chatd's alone.
        StateDirectory = name;
        StateDirectoryMode = "0700";
        WorkingDirectory = stateDir;
        UMask = "0077";
        Restart = "on-failure";
        RestartSec = "10s";
        MemoryDenyWriteExecute = true;
      } // hardening.unit false // {
        # The boxmaker group's socket must be reachable with the real group ids: no user
        # namespace of the unit's own (everything else of the hardening set stays).
        PrivateUsers = false;
      };
    };
  };
}
