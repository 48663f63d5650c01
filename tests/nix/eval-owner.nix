# The module as an owner uses it (docs/operations.md): a model from the catalogue, llama-server
# private, the settings that the daemons' flags or the module own, boxd's own settings and the
# unit around boxd. Evaluated with nixpkgs' real lib (tests/nix/eval.nix), like eval-module.nix:
#   nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-owner.nix \
#     --argstr binDir DIR      (DIR/bin holds loopd, brokerd, boxd)
# Prints the config build scripts of a box with boxd's own settings and of docs/approvals.md's
# snippet, which scripts/nix-checks.sh runs (the daemons' --check-config on them). The
# evaluations that must fail: tests/nix/eval-fail.nix.
{ binDir }:
let
  inherit (import ./eval.nix { inherit binDir; }) lib evalBox;

  base = { enable = true; model = "qwen2.5-coder-0.5b"; };
  boxOf = u: (evalBox { user = base // u; }).config;
  box = boxOf { };

  check = what: ok: if ok then true else throw "eval-owner: ${what}";

  catalogue = import ../../nixos-module/models.nix;
  default = catalogue."qwen2.5-coder-0.5b";
  larger = catalogue."qwen2.5-coder-1.5b";
  template = "${binDir}/share/boxmaker/templates/qwen2.5-tools.jinja";

  # The boxd.toml template the config build fills in, its [[children]] tables, and one of them.
  renderedBoxd = c: builtins.readFile (builtins.head
    (builtins.match ".* ([^ \n]*boxd.toml.in) > .*" c.services.boxmaker.configDir.script));
  childOf = name: c: builtins.head (builtins.filter (t: lib.hasInfix "\nname = \"${name}\"\n" t)
    (lib.splitString "\n[[children]]\n" (renderedBoxd c)));
  llamaArgs = c: builtins.head (builtins.match "args = (\\[[^\n]*])\n.*" (childOf "llama-server" c));
  # boxd.toml without its children: boxd's own keys and sections.
  boxdOwn = c: "\n" + builtins.head (lib.splitString "\n[[children]]\n" (renderedBoxd c));
  renderedBrokerd = c: builtins.readFile (builtins.head
    (builtins.match ".*/bin/brokerd --check-config ([^ \n]*).*" c.services.boxmaker.configDir.script));
  unit = c: c.systemd.services.boxmaker;

  # The stand-in's fetchurl keeps what it was given (tests/nix/stand-in.nix).
  fetched = box.services.boxmaker.modelFile;
  # A model derivation of the flake's legacyPackages.<system>.models, and one made without the
  # catalogue (a plain fetchurl: no entry, so no template).
  standIn = import ./stand-in.nix { inherit lib binDir; };
  fromFlake = import ../../nixos-module/fetch-model.nix { inherit (standIn.pkgs) fetchurl; } "qwen2.5-coder-1.5b" larger;
  plain = standIn.pkgs.fetchurl { name = "other.gguf"; url = "https://example.org/other.gguf"; sha256 = "0000000000000000000000000000000000000000000000000000"; };
  pathBox = boxOf { model = "/var/lib/models/test.gguf"; };
  # The digests scripts/fetch-parts.sh pins for the files it assembles (the tests' models).
  fetchParts = builtins.readFile ../../scripts/fetch-parts.sh;
  pinOf = var: let m = builtins.match ".*\n${var}=([0-9a-f]{64})\n.*" fetchParts; in if m == null then null else builtins.head m;

  # Grants: both lists, the module's first; an exec grant in settings alone turns exec on.
  settingsGrant = { tool = "read_file"; sessions = [ "main" ]; paths = [ "/var/lib/boxmaker/files" ]; };
  execGrant = { tool = "exec"; sessions = [ "main" ]; programs = [ "wc" ]; rw_paths = [ "/var/lib/boxmaker/files" ]; };
  bothGrants = boxOf { brokerd.settings.grants = [ settingsGrant ]; };
  execInSettings = boxOf { brokerd.settings.grants = [ execGrant ]; };

  # boxd's own settings: a log level, a metrics listener, one restart key.
  tuned = boxOf { boxd.settings = { log.level = "debug"; metrics.listen = "127.0.0.1:9465"; restart.max_restarts = 2; }; };

  rpc = boxOf { llama = { rpcServers = [ "10.100.0.2:50052" ]; extraFlags = [ "-ngl" "99" ]; }; };
  endpoints = boxOf { loopd.settings.llama.endpoints = [{ name = "cupboard"; url = "https://gpu.lan:8443"; }]; };

  # The README's NixOS example, as written: its services.boxmaker attribute set.
  readmeSettings = import (builtins.toFile "readme-boxmaker.nix" (builtins.head (builtins.match
    ".*```nix\n.*\n          services[.]boxmaker = ([{]\n[^`]*\n          [}]);\n.*```.*" (builtins.readFile ../../README.md))));
  readme = (evalBox { user = readmeSettings; }).config;

  # docs/approvals.md's NixOS snippet, as written: its services.boxmaker attribute set (the block
  # starts with it, at the line's start, and closes it with a line "};").
  approvalsMatch = builtins.match ".*```nix\nservices[.]boxmaker = ([{]\n[^`]*\n[}]);\n.*"
    (builtins.readFile ../../docs/approvals.md);
  approvalsSettings = if approvalsMatch == null
    then throw "eval-owner: docs/approvals.md has no nix block that starts with `services.boxmaker = {`"
    else import (builtins.toFile "approvals-boxmaker.nix" (builtins.head approvalsMatch));
  approvals = (evalBox { user = approvalsSettings; }).config;
  renderedLoopd = c: builtins.readFile (builtins.head
    (builtins.match ".*/bin/loopd --check-config ([^ \n]*).*" c.services.boxmaker.configDir.script));

  # The options' documentation, as NixOS's manual renders it.
  docs = lib.optionAttrSetToDocList (evalBox { user = base; }).options.services.boxmaker;
  packageOptions = builtins.filter (o: lib.hasInfix "package" (o.type or "") && o.visible or true && !(o.internal or false)) docs;

  checks = [
    # Point 1: a model on the box, declaratively.
    (check "the catalogue: every entry has an https URL of Qwen's, a sha256, a template of config/templates and a context"
      (builtins.all (e: lib.hasPrefix "https://huggingface.co/Qwen/" e.url
          && builtins.match "[0-9a-f]{64}" e.sha256 != null
          && builtins.pathExists (../../config/templates + "/${e.template}")
          && e.contextSize > 0 && builtins.isList e.llamaFlags)
        (builtins.attrValues catalogue)))
    (check "the default model's sha256 is the one scripts/fetch-parts.sh verifies"
      (default.sha256 == pinOf "QWEN_SHA256"))
    (check "the larger model's sha256 is fetch-parts.sh's, where it pins one"
      (pinOf "QWEN15_SHA256" == null || larger.sha256 == pinOf "QWEN15_SHA256"))
    (check "a catalogue name: llama-server loads the fixed-output derivation of its URL and sha256"
      (fetched.url == default.url && fetched.sha256 == default.sha256 && fetched.name == default.file
        && lib.hasInfix "\"-m\", \"${fetched.outPath}\"" (llamaArgs box)))
    (check "a catalogue name: its chat template from the package, its context size"
      (lib.hasInfix "\"--chat-template-file\", \"${template}\"" (llamaArgs box)
        && lib.hasInfix "\"-c\", \"${toString default.contextSize}\"" (llamaArgs box)
        && box.services.boxmaker.llama.chatTemplateFile == template))
    (check "the flake's model derivation: its entry's template, the derivation itself loaded"
      (let c = boxOf { model = fromFlake; }; in
        c.services.boxmaker.modelFile == fromFlake
        && lib.hasInfix "\"-m\", \"${fromFlake.outPath}\"" (llamaArgs c)
        && lib.hasInfix "\"--chat-template-file\", \"${template}\"" (llamaArgs c)))
    (check "an entry the owner pins: fetched with that sha256"
      (let c = boxOf { model = larger // { sha256 = "1111111111111111111111111111111111111111111111111111"; }; }; in
        c.services.boxmaker.modelFile.sha256 == "1111111111111111111111111111111111111111111111111111"
        && c.services.boxmaker.modelFile.url == larger.url))
    (check "a plain derivation or a path: no template, the module's context"
      (let c = boxOf { model = plain; }; in
        !(lib.hasInfix "--chat-template-file" (llamaArgs c))
        && lib.hasInfix "\"-m\", \"${plain.outPath}\"" (llamaArgs c)
        && !(lib.hasInfix "--chat-template-file" (llamaArgs pathBox))
        && lib.hasInfix "\"-m\", \"/var/lib/models/test.gguf\"" (llamaArgs pathBox)
        && pathBox.services.boxmaker.contextSize == 24576))
    (check "the owner's contextSize and chatTemplateFile win over the entry's"
      (let c = boxOf { contextSize = 8192; llama.chatTemplateFile = null; }; in
        lib.hasInfix "\"-c\", \"8192\"" (llamaArgs c) && !(lib.hasInfix "--chat-template-file" (llamaArgs c))))
    (check "the README's example evaluates, its assertions hold, with the default model of the catalogue and its template"
      (readmeSettings.model == "qwen2.5-coder-0.5b"
        && lib.hasInfix "\"--chat-template-file\", \"${template}\"" (llamaArgs readme)
        && lib.hasInfix "\"-m\", \"${fetched.outPath}\"" (llamaArgs readme)))
    (check "docs/approvals.md's NixOS snippet evaluates: write_file under approve = \"always\", write_file in the tools array, both [approvals] sections"
      (let brokerd = renderedBrokerd approvals; loopd = renderedLoopd approvals; in
        lib.hasInfix "approve = \"always\"\npaths = [\"/var/lib/boxmaker/files\"]\nsessions = [\"*\"]\ntool = \"write_file\"" brokerd
        && lib.hasInfix "\n[approvals]\nexpire_ms = 900000\n" brokerd
        && lib.hasInfix "\n[approvals]\ntimeout_ms = 600000\n" loopd
        && lib.hasInfix "core_tools = [\"read_file\", \"list_dir\", \"write_file\"]" loopd))
    # Point 2: llama-server private (on its socket, no web UI, no TCP port), with a model too.
    (check "llama-server on its socket, no web UI, no port, with a catalogue model"
      (lib.hasPrefix "[\"--host\", \"/run/boxmaker/llama/llama.sock\", \"--no-webui\", \"-m\"" (llamaArgs box)
        && !(lib.hasInfix "--port" (llamaArgs box))))
    # Point 3: the module's maintainers, and a documented default for every package option.
    (check "the documentation renders with nothing set (NixOS's manual: no model, no overlay)"
      (builtins.deepSeq (lib.optionAttrSetToDocList (evalBox { user = { }; withBoxmaker = false; }).options.services.boxmaker) true))
    (check "meta.maintainers is declared (empty: see the comment in default.nix)" (box.meta.maintainers == [ ]))
    (check "every package option has a defaultText (pkgs.boxmaker, pkgs.llama-cpp), none rendered from a derivation"
      (builtins.length packageOptions >= 3
        && builtins.all (o: o ? default.text && !(lib.hasPrefix "<derivation" o.default.text)) packageOptions
        && builtins.all (n: builtins.any (o: o.name == "services.boxmaker.${n}") packageOptions) [ "package" "llama.package" ]
        && builtins.all (o: o.name != "services.boxmaker.package" || o.default.text == "pkgs.boxmaker") packageOptions
        && builtins.all (o: o.name != "services.boxmaker.llama.package" || o.default.text == "pkgs.llama-cpp") packageOptions))
    # Point 4: every setting works or fails loudly.
    (check "grants and brokerd.settings.grants: both rendered, the module's first"
      (let text = renderedBrokerd bothGrants; in
        builtins.length (lib.splitString "\n[[grants]]\n" text) == 4
        && lib.hasInfix "tool = \"echo\"\n\n[[grants]]\npaths = [\"/var/lib/boxmaker/files\"]" text))
    (check "an exec grant in brokerd.settings.grants turns exec on" execInSettings.services.boxmaker.exec)
    (check "boxd.settings: the log level, the metrics listener and a restart key rendered, the rest kept"
      (let text = boxdOwn tuned; in
        lib.hasInfix "\n[log]\nlevel = \"debug\"\n" text
        && lib.hasInfix "\n[metrics]\nlisten = \"127.0.0.1:9465\"\n" text
        && lib.hasInfix "\nmax_restarts = 2\n" text && lib.hasInfix "\nwindow_ms = 600000\n" text
        && lib.hasInfix "\nnotify = true\n" text))
    (check "boxd.settings by default: [log] info, no [metrics] listener"
      (let text = boxdOwn box; in
        lib.hasInfix "\n[log]\nlevel = \"info\"\n" text && !(lib.hasInfix "[metrics]\nlisten" text)))
    (check "UMask=0077, and a watchdog boxd pings (notify = true) at half its period"
      ((unit box).serviceConfig.UMask == "0077" && (unit box).serviceConfig.WatchdogSec == "60s"
        && (unit box).serviceConfig.NotifyAccess == "main"
        && lib.hasInfix "\nnotify = true\n" (boxdOwn box)))
    (check "no RPC, no remote endpoint: the unit does not wait for network-online"
      (!(builtins.elem "network-online.target" ((unit box).after ++ (unit box).wants))))
    (check "RPC workers or remote endpoints: After= and Wants= network-online.target"
      (builtins.all (c: builtins.elem "network-online.target" (unit c).after && builtins.elem "network-online.target" (unit c).wants)
        [ rpc endpoints ]))
  ];
in
builtins.seq (builtins.all (x: x) checks) {
  # boxd --check-config on the boxd.toml with boxd's own settings (scripts/nix-checks.sh).
  configScript = tuned.services.boxmaker.configDir.script;
  # The same for docs/approvals.md's snippet: brokerd --check-config on its approve = "always".
  approvalsScript = approvals.services.boxmaker.configDir.script;
}
