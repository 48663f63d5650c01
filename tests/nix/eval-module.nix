# Evaluates nixos-module/default.nix with nixpkgs' real lib (tests/nix/eval.nix) and asserts on
# the result. Run: nix-instantiate --eval --strict --json --read-write-mode \
#   tests/nix/eval-module.nix --argstr binDir DIR      (DIR/bin holds loopd, brokerd, boxd)
# Prints the rendered unit and configs as JSON (scripts/nix-checks.sh checks them further).
# The evaluations that must fail, or warn, are in tests/nix/eval-case.nix.
{ binDir }:
let
  inherit (import ./eval.nix { inherit binDir; }) lib evalBox;

  user = {
    enable = true;
    model = "/var/lib/models/test.gguf";
    contextSize = 8192;
    slots = 3;
    llama.extraFlags = [ "-ngl" "0" ];
    loopd.settings = {
      loop.max_steps = 16;
      llama.retry_max_attempts = 3;
    };
    brokerd.settings.log.level = "debug";
    # The config build below runs loopd --check-config on them, on [metrics] and on [web].
    schedules = [ morning hourly ];
    metrics.enable = true;
    web = { enable = true; origin = "https://box.example.com"; };
    grants = [
      { tool = "clock"; sessions = [ "*" ]; }
      { tool = "read_file"; sessions = [ "main" ]; paths = [ "/var/lib/boxmaker/files" ]; result_class = "private"; }
      # brokerd --check-config (the config build) checks that {secret:github} names a [[secrets]].
      { tool = "http_fetch"; sessions = [ "main" ]; hosts = [ "api.github.com" ]; headers.Authorization = "Bearer {secret:github}"; }
    ];
    # Two systemd credentials and one file brokerd reads itself.
    brokerd.secrets = {
      github.file = "/run/agenix/github";
      mail_token.file = "/run/secrets/mail";
      wiki = { file = "/run/agenix/wiki"; loadCredential = false; };
    };
  };

  inherit (evalBox { inherit user; }) config;
  cfg = config.services.boxmaker;
  sc = config.systemd.services.boxmaker.serviceConfig;
  configs = cfg.configDir;

  check = what: ok: if ok then true else throw "eval-module: ${what}";
  has = k: v: check "serviceConfig.${k} = ${builtins.toJSON v}" ((sc.${k} or null) == v);

  disabled = (evalBox { user = user // { enable = false; }; }).config;

  # chatd (nixos-module/chat.nix): its own unit and user, loopd's group, a credential.
  matrixKey = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQ";
  chatOf = m: (evalBox { user = user // { chat.matrix = {
    enable = true;
    homeserver = "https://matrix.example.org";
    user = "@box:example.org";
    owners = [ "@me:example.org" ];
    notifyRoom = "!abc:example.org";
    trustedDevices = [{ user = "@me:example.org"; device = "PHONE"; ed25519 = matrixKey; }];
  } // m; }; }).config;
  chat = chatOf { passwordFile = "/run/agenix/matrix-box"; };
  csc = chat.systemd.services.boxmaker-chat.serviceConfig;
  renderedChatd = c: builtins.readFile (builtins.head
    (builtins.match ".*/bin/chatd --check-config ([^ \n]*).*" c.services.boxmaker.chat.matrix.configDir.script));
  unitOf = u: (evalBox { user = user // u; }).config.systemd.services.boxmaker.serviceConfig;

  # Without the flake's overlay: the options' documentation still renders (NixOS's manual
  # evaluates it with whatever pkgs the system has).
  docs = lib.optionAttrSetToDocList (evalBox { inherit user; withBoxmaker = false; }).options.services.boxmaker;
  docOf = name: builtins.head (builtins.filter (o: o.name == "services.boxmaker.${name}") docs);

  gpu = unitOf { llama.gpu = true; };
  gpuExec = unitOf { llama.gpu = true; grants = user.grants ++ [ execGrant ]; };
  mcp = [{ name = "fs"; prefix = "fs"; command = "npx"; args = [ "-y" "@modelcontextprotocol/server-filesystem" "/var/lib/boxmaker/files" ]; }];
  withMcp = unitOf { brokerd.settings.mcp = mcp; };
  withMcpForced = unitOf { brokerd.settings.mcp = mcp; memoryDenyWriteExecute = true; };
  otherState = (evalBox { user = user // { stateDir = "/var/lib/box/main"; }; }).config;
  execGrant = { tool = "exec"; sessions = [ "main" ]; programs = [ "wc" ]; rw_paths = [ "/var/lib/boxmaker/files" ]; };
  withExec = unitOf { grants = user.grants ++ [ execGrant ]; };
  execOff = unitOf { grants = user.grants ++ [ execGrant ]; exec = false; };
  # What the unit keeps whether or not exec is on.
  keptHardening = u: u.ProtectSystem == "strict" && u.NoNewPrivileges && u.CapabilityBoundingSet == ""
    && u.PrivateUsers && u.PrivateDevices && u.PrivateTmp && u.ProtectHome && u.MemoryDenyWriteExecute
    && u.ProtectProc == "invisible" && u.RestrictSUIDSGID && u.LockPersonality && u.ProtectControlGroups
    && u.ProtectKernelModules && u.ProtectClock;
  fullHardening = u: keptHardening u && u.RestrictNamespaces == true && u.ProtectKernelTunables
    && u.ProtectKernelLogs && u.ProtectHostname && u.ProcSubset == "pid"
    && u.SystemCallFilter == [ "@system-service" "~@privileged" ]
    && u.RestrictAddressFamilies == [ "AF_INET" "AF_INET6" "AF_UNIX" ];
  # systemd applies the filter's entries in order: what follows ~@privileged is allowed again.
  after = x: l: let i = lib.lists.findFirstIndex (e: e == x) null l; j = lib.lists.findFirstIndex (e: e == "~@privileged") null l;
    in i != null && j != null && i > j;

  # Schedules: a cron one with every key, and an interval one with only what it needs.
  morning = {
    name = "morning"; cron = "0 7 * * *"; timezone = "Europe/Berlin"; task = "Summarise files/.";
    session = "new"; missed = "run_once"; quiet_reply = "NOTHING_NEW"; notify = "unless_quiet"; enabled = true;
  };
  hourly = { name = "hourly"; every = "1h"; task_file = "/etc/boxmaker/hourly.md"; };
  scheduled = config;
  unscheduled = (evalBox { user = user // { schedules = [ ]; }; }).config;
  # Metrics: on (the default port), on another port, off.
  metricsOn = config;
  metricsPort = (evalBox { user = user // { metrics = { enable = true; port = 9500; }; }; }).config;
  metricsOff = (evalBox { user = user // { metrics.enable = false; }; }).config;
  metricsBoxdPort = (evalBox { user = user // { metrics = { enable = true; boxdPort = 9600; instance = "cupboard"; }; }; }).config;
  # brokerd's own listener (its freeform settings): scrapeConfigs scrapes it too.
  metricsBrokerd = (evalBox { user = lib.recursiveUpdate user { brokerd.settings.metrics.listen = "127.0.0.1:9465"; }; }).config;
  # The scrape job of `name` in scrapeConfigs: its target and its instance label.
  scrapeOf = c: name: map (j: builtins.head j.static_configs)
    (builtins.filter (j: j.job_name == "boxmaker-${name}") c.services.boxmaker.metrics.scrapeConfigs);
  # The web console: on behind a proxy (origin), on another port without origin, off.
  webOn = config;
  webPort = (evalBox { user = user // { web = { enable = true; port = 8800; }; }; }).config;
  webOff = (evalBox { user = user // { web.enable = false; }; }).config;
  # The loopd.toml the config build checks, as the module rendered it.
  renderedLoopd = c: builtins.readFile (builtins.head
    (builtins.match ".*/bin/loopd --check-config ([^ \n]*).*" c.services.boxmaker.configDir.script));
  # The brokerd.toml the config build checks, as the module rendered it.
  renderedBrokerd = c: builtins.readFile (builtins.head
    (builtins.match ".*/bin/brokerd --check-config ([^ \n]*).*" c.services.boxmaker.configDir.script));
  # Secrets: none, and brokerd.configFile (the module cannot write into it).
  noSecrets = (evalBox { user = user // { brokerd.secrets = { }; }; }).config;
  secretsConfigFile = unitOf { brokerd.configFile = "/etc/brokerd.toml"; brokerd.secrets = { inherit (user.brokerd.secrets) github; }; };
  # The boxd.toml template the config build fills in, as the module rendered it.
  renderedBoxd = c: builtins.readFile (builtins.head
    (builtins.match ".* ([^ \n]*boxd.toml.in) > .*" c.services.boxmaker.configDir.script));

  # llama.cpp RPC (docs/scale-out.md): workers for this llama-server, -ngl sending layers to them.
  rpcServers = [ "10.100.0.2:50052" "10.100.0.3:50052" ];
  withRpc = evalBox { user = user // { llama = { inherit rpcServers; extraFlags = [ "-ngl" "99" ]; }; }; };
  # A worker: loopback (the default), and exposed on a tunnel's address with the firewall open.
  # `raw` for the exposed one: it warns by design (eval-case.nix checks the warning's text).
  workerOf = u: evalBox { user = user // { rpcWorker = { enable = true; } // u; }; };
  worker = (workerOf { port = 50100; threads = 1; }).config;
  wsc = worker.systemd.services.boxmaker-rpc-worker.serviceConfig;
  exposed = (workerOf { host = "10.100.0.2"; openFirewall = true; allowedClients = [ "10.100.0.1/32" ]; }).raw;
  esc = exposed.systemd.services.boxmaker-rpc-worker.serviceConfig;
  # nixpkgs' llama-cpp built with rpcSupport, as the module sees it: no warning about RPC.
  rpcBuild = { type = "derivation"; name = "llama-cpp"; outPath = "${builtins.storeDir}/00000000000000000000000000000002-llama-cpp"; cmakeFlags = [ "-DGGML_RPC:BOOL=TRUE" ]; };
  rpcBuilt = (evalBox { user = user // { llama = { inherit rpcServers; package = rpcBuild; }; rpcWorker.enable = true; }; }).raw;
  # A machine that only lends its memory: no appliance, so no model either.
  workerOnly = (evalBox { user = { rpcWorker.enable = true; }; }).config;
  # loopd's [[llama.endpoints]]: loopd routes to them and refuses `[llama] url` or --llama beside.
  endpoints = [{
    name = "cupboard"; url = "https://gpu.lan:8443"; api_key_file = "/run/agenix/llama-key";
    ca_file = "/etc/boxmaker/lan-ca.pem"; roles = [ "main" "background" ]; slots.main = [ 0 1 ];
  }];
  withEndpoints = (evalBox { user = user // { loopd.settings.llama.endpoints = endpoints; }; }).config;
  configFileNoUrl = (evalBox { user = user // { loopd.configFile = "/etc/loopd.toml"; loopd.passLlamaUrl = false; schedules = [ ]; metrics.enable = false; web.enable = false; }; }).config;
  loopdArgs = c: builtins.head (builtins.match ".*\\[\\[children]]\nargs = (\\[[^]]*]).*name = \"loopd\".*" (renderedBoxd c));

  # llama-server's HTTP API (docs/security.md, "llama-server's slot API"): on a Unix socket in a
  # directory of the boxmaker user's alone by default; on TCP only with an API key, which
  # systemd hands the unit as a credential (llama.host, llama.apiKeyFile).
  llamaSocket = "/run/boxmaker/llama/llama.sock";
  llamaKey = "/run/credentials/boxmaker.service/llama-api-key";
  # The [[children]] table of child `name` (of llama-server) in the rendered boxd.toml.
  childOf = name: c: builtins.head (builtins.filter (t: lib.hasInfix "\nname = \"${name}\"\n" t)
    (lib.splitString "\n[[children]]\n" (renderedBoxd c)));
  llamaChild = childOf "llama-server";
  llamaArgs = c: builtins.head (builtins.match "args = (\\[[^\n]*])\n.*" (llamaChild c));
  llamaCommand = c: builtins.head (builtins.match ".*\ncommand = \"([^\"]*)\"\n.*" (llamaChild c));
  startTimeout = name: c: lib.toInt (builtins.head (builtins.match ".*\nstart_timeout_ms = ([0-9]+)\n.*" (childOf name c)));
  llamaCredentials = u: builtins.filter (lib.hasPrefix "llama-api-key:") (u.LoadCredential or [ ]);
  tcpKeyed = (evalBox { user = user // { llama = { host = "127.0.0.1"; port = 8081; apiKeyFile = "/run/agenix/llama-key"; }; }; }).config;
  tcpSc = tcpKeyed.systemd.services.boxmaker.serviceConfig;
  socketKeyed = (evalBox { user = user // { llama.apiKeyFile = "/run/agenix/llama-key"; }; }).config;
  ipv6 = (evalBox { user = user // { llama = { host = "::1"; apiKeyFile = "/run/agenix/llama-key"; }; }; }).config;

  checks = [
    (has "Type" "notify")
    (has "KillMode" "mixed")
    (has "ProtectSystem" "strict")
    (has "NoNewPrivileges" true)
    (has "CapabilityBoundingSet" "")
    (has "PrivateTmp" true)
    (has "ProtectHome" true)
    (has "MemoryDenyWriteExecute" true)
    (has "RestrictAddressFamilies" [ "AF_INET" "AF_INET6" "AF_UNIX" ])
    (has "RuntimeDirectory" "boxmaker boxmaker/llama")
    (check "SystemCallFilter has @system-service" (builtins.elem "@system-service" sc.SystemCallFilter))
    (has "StateDirectory" "boxmaker boxmaker/loopd boxmaker/loopd/kv boxmaker/brokerd")
    (has "WorkingDirectory" "/var/lib/boxmaker")
    (check "TimeoutStopSec" (sc ? TimeoutStopSec))
    (check "ExecStart runs boxd with the checked config"
      (sc.ExecStart == "${binDir}/bin/boxd --config ${configs.outPath}/boxd.toml"))
    (check "the config derivation runs every --check-config"
      (builtins.all (d: builtins.match ".*bin/${d} --check-config.*" configs.script != null) [ "loopd" "brokerd" "boxd" ]))
    (check "boxctl on the system path" (builtins.elem cfg.package config.environment.systemPackages))
    (check "group boxmaker" (config.users.groups ? boxmaker))
    (check "system user" (config.users.users.boxmaker.isSystemUser && config.users.users.boxmaker.group == "boxmaker"))
    (check "loopd socket" (cfg.loopd.settings.socket == "/run/boxmaker/loopd.sock"))
    (check "loopd broker socket" (cfg.loopd.settings.broker.socket == "/run/boxmaker/brokerd.sock"))
    (check "loopd file tools are core" (cfg.loopd.settings.broker.core_tools == [ "read_file" "list_dir" ]))
    (check "loopd freeform keys kept" (cfg.loopd.settings.loop.max_steps == 16 && cfg.loopd.settings.llama.retry_max_attempts == 3))
    (check "loopd llama url default: this machine's llama-server on its socket" (cfg.loopd.settings.llama.url == "unix:${llamaSocket}"))
    (check "brokerd socket" (cfg.brokerd.settings.socket == "/run/boxmaker/brokerd.sock"))
    (check "connection caps rendered" (cfg.loopd.settings.api.max_connections == 256 && cfg.brokerd.settings.limits.max_connections == 128))
    (has "LimitNOFILE" (256 + 128 + 4096))
    (check "docs render without the overlay" (builtins.deepSeq docs true))
    (check "package's documented default is pkgs.boxmaker" ((docOf "package").default.text == "pkgs.boxmaker"))
    (check "no GPU by default: PrivateDevices, no DeviceAllow, ProcSubset=pid"
      (sc.PrivateDevices && !(sc ? DeviceAllow) && sc.ProcSubset == "pid"))
    (check "llama.gpu opens the GPU nodes and only those"
      (!gpu.PrivateDevices && gpu.DevicePolicy == "closed"
        && builtins.all (d: builtins.elem d gpu.DeviceAllow) [ "char-nvidiactl" "char-nvidia-uvm" "char-drm" "char-kfd" ]
        && gpu.ProcSubset == "all" && builtins.elem "render" gpu.SupplementaryGroups))
    (check "llama.gpu keeps the rest of the hardening"
      (gpu.MemoryDenyWriteExecute && gpu.ProtectSystem == "strict" && gpu.PrivateUsers))
    (check "[[mcp]] servers (a JIT, Node.js) turn MemoryDenyWriteExecute off" (!withMcp.MemoryDenyWriteExecute))
    (check "memoryDenyWriteExecute = true wins over [[mcp]]" withMcpForced.MemoryDenyWriteExecute)
    (check "stateDir under /var/lib derives StateDirectory"
      (otherState.systemd.services.boxmaker.serviceConfig.StateDirectory == "box/main box/main/loopd box/main/loopd/kv box/main/brokerd"
        && otherState.systemd.services.boxmaker.serviceConfig.WorkingDirectory == "/var/lib/box/main"
        && otherState.services.boxmaker.loopd.settings.state_dir == "/var/lib/box/main/loopd"))
    (check "bubblewrap on the unit's path (for brokerd's exec tool)"
      (builtins.any (p: (p.name or "") == "bubblewrap") config.systemd.services.boxmaker.path))
    (check "loopd's allocator settings (GLIBC_TUNABLES) are the shipped config/boxd.toml's"
      (let
        loopdOf = toml: builtins.head (builtins.filter (ch: ch.name == "loopd") (builtins.fromTOML toml).children);
        shipped = loopdOf (builtins.readFile ../../config/boxd.toml);
      in (loopdOf (builtins.unsafeDiscardStringContext (renderedBoxd config))).env.GLIBC_TUNABLES == shipped.env.GLIBC_TUNABLES))
    (check "the time zones come from the tzdata package (TZDIR), not from /etc, at run time and in the config check's build"
      (config.systemd.services.boxmaker.environment.TZDIR == "/nix/store/00000000000000000000000000000000-tzdata/share/zoneinfo"
        && config.services.boxmaker.configDir.env.TZDIR == config.systemd.services.boxmaker.environment.TZDIR))
    (check "slirp4netns on the unit's path (the network of an exec grant with network = true)"
      (builtins.any (p: (p.name or "") == "slirp4netns") config.systemd.services.boxmaker.path))
    (check "an exec grant: /dev/net/tun bound and allowed for slirp4netns, no other device"
      (withExec.BindPaths == [ "-/dev/net/tun" ] && withExec.DeviceAllow == [ "/dev/net/tun rw" ]
        && withExec.DevicePolicy == "closed" && withExec.PrivateDevices))
    (check "a GPU and an exec grant: the GPU's nodes and /dev/net/tun both allowed"
      (builtins.elem "/dev/net/tun rw" gpuExec.DeviceAllow && builtins.elem "char-nvidiactl" gpuExec.DeviceAllow))
    (check "no exec grant: the whole hardening set, no namespace allowed" (!cfg.exec && fullHardening sc))
    (check "exec = false keeps the whole hardening set even with an exec grant" (fullHardening execOff))
    (check "brokerd.configFile: the module cannot see an exec grant, exec is off"
      (!(evalBox { user = user // { brokerd.configFile = "/etc/brokerd.toml"; grants = [ execGrant ]; }; }).config.services.boxmaker.exec))
    (check "an exec grant: the namespaces bwrap --unshare-all makes, and only those"
      (withExec.RestrictNamespaces == "cgroup ipc mnt net pid user uts"))
    (check "an exec grant: what stops bwrap's /proc is off, and its syscalls and rtnetlink allowed"
      (!withExec.ProtectKernelTunables && !withExec.ProtectKernelLogs && !withExec.ProtectHostname
        && withExec.ProcSubset == "all"
        && builtins.all (x: after x withExec.SystemCallFilter) [ "@mount" "capset" "landlock_restrict_self" "~syslog" ]
        && builtins.head withExec.SystemCallFilter == "@system-service"
        && withExec.RestrictAddressFamilies == [ "AF_INET" "AF_INET6" "AF_UNIX" "AF_NETLINK" ]))
    (check "an exec grant keeps the rest of the hardening (PrivateUsers too: nested user namespaces work)"
      (keptHardening withExec))
    (check "schedules rendered into loopd's settings, keys left null not written"
      (scheduled.services.boxmaker.loopd.settings.schedules == [ morning hourly ]))
    (check "schedules rendered as [[schedules]] tables in loopd.toml"
      (let text = renderedLoopd scheduled; in
        lib.hasInfix "\n[[schedules]]\ncron = \"0 7 * * *\"\nenabled = true\nmissed = \"run_once\"\nname = \"morning\"\n" text
        && lib.hasInfix "\n[[schedules]]\nevery = \"1h\"\nname = \"hourly\"\ntask_file = \"/etc/boxmaker/hourly.md\"\n" text))
    (check "no schedules: loopd's settings have none" (!(unscheduled.services.boxmaker.loopd.settings ? schedules)))
    (check "metrics: loopd listens on 127.0.0.1 at the default port"
      (metricsOn.services.boxmaker.loopd.settings.metrics.listen == "127.0.0.1:9464"))
    (check "metrics rendered as [metrics] listen in loopd.toml"
      (lib.hasInfix "\n[metrics]\nlisten = \"127.0.0.1:9464\"\n" (renderedLoopd metricsOn)))
    (check "metrics.port is the port loopd listens on"
      (metricsPort.services.boxmaker.loopd.settings.metrics.listen == "127.0.0.1:9500"))
    (check "metrics off: loopd's settings have no [metrics]" (!(metricsOff.services.boxmaker.loopd.settings ? metrics)))
    (check "metrics do not open the firewall"
      (metricsOn.networking.firewall.allowedTCPPorts == [ ] && metricsPort.networking.firewall.allowedTCPPorts == [ ]))
    (check "metrics: boxd listens on 127.0.0.1 at the default boxdPort, rendered as [metrics] listen in boxd.toml"
      (metricsOn.services.boxmaker.boxd.settings.metrics.listen == "127.0.0.1:9466"
        && lib.hasInfix "\n[metrics]\nlisten = \"127.0.0.1:9466\"\n" (renderedBoxd metricsOn)))
    (check "metrics.boxdPort is the port boxd listens on"
      (metricsBoxdPort.services.boxmaker.boxd.settings.metrics.listen == "127.0.0.1:9600"))
    (check "metrics off: boxd has no listener (its socket still serves /metrics)"
      (metricsOff.services.boxmaker.boxd.settings.metrics.listen == null
        && !(lib.hasInfix "\nlisten = " (renderedBoxd metricsOff))))
    (check "scrapeConfigs: a job for loopd and one for boxd, each with the box's name as instance"
      (scrapeOf metricsOn "loopd" == [ { targets = [ "127.0.0.1:9464" ]; labels.instance = "boxmaker"; } ]
        && scrapeOf metricsOn "boxd" == [ { targets = [ "127.0.0.1:9466" ]; labels.instance = "boxmaker"; } ]
        && scrapeOf metricsBoxdPort "boxd" == [ { targets = [ "127.0.0.1:9600" ]; labels.instance = "cupboard"; } ]
        && builtins.length metricsOn.services.boxmaker.metrics.scrapeConfigs == 2))
    (check "scrapeConfigs: brokerd's job when brokerd.settings.metrics.listen is set; none with metrics off"
      (scrapeOf metricsBrokerd "brokerd" == [ { targets = [ "127.0.0.1:9465" ]; labels.instance = "boxmaker"; } ]
        && metricsOff.services.boxmaker.metrics.scrapeConfigs == [ ]))
    (check "web: loopd's console on 127.0.0.1 at the default port, with the origin"
      (webOn.services.boxmaker.loopd.settings.web == { listen = "127.0.0.1:8740"; origin = "https://box.example.com"; }))
    (check "web rendered as [web] listen and origin in loopd.toml"
      (lib.hasInfix "\n[web]\nlisten = \"127.0.0.1:8740\"\norigin = \"https://box.example.com\"\n" (renderedLoopd webOn)))
    (check "web.port is the port loopd listens on; no origin: none written"
      (webPort.services.boxmaker.loopd.settings.web == { listen = "127.0.0.1:8800"; }
        && lib.hasInfix "\n[web]\nlisten = \"127.0.0.1:8800\"\n" (renderedLoopd webPort)
        && !(lib.hasInfix "origin" (renderedLoopd webPort))))
    (check "web off: loopd's settings and loopd.toml have no [web]"
      (!(webOff.services.boxmaker.loopd.settings ? web) && !(lib.hasInfix "[web]" (renderedLoopd webOff))))
    (check "web does not open the firewall"
      (webOn.networking.firewall.allowedTCPPorts == [ ] && webPort.networking.firewall.allowedTCPPorts == [ ]))
    (check "boxd serves /metrics on its socket in the run dir, for the boxmaker group"
      (let text = renderedBoxd config; in
        lib.hasInfix "\nsocket = \"/run/boxmaker/boxd.sock\"\n" text
        && lib.hasInfix "\nsocket_group = \"boxmaker\"\n" text))
    (check "secrets: a LoadCredential= per credential, named as brokerd reads it, and none for a file brokerd reads"
      (sc.LoadCredential == [ "github:/run/agenix/github" "mail_token:/run/secrets/mail" ]))
    (check "secrets rendered as [[secrets]] in brokerd.toml: credentials without a file, the other with its own"
      (let text = renderedBrokerd config; in
        lib.hasInfix "\n[[secrets]]\nname = \"github\"\n" text
        && lib.hasInfix "\n[[secrets]]\nname = \"mail_token\"\n" text
        && lib.hasInfix "\n[[secrets]]\nfile = \"/run/agenix/wiki\"\nname = \"wiki\"\n" text
        && builtins.length (lib.splitString "[[secrets]]" text) == 4))
    (check "secrets: the grants and the other settings are rendered beside them"
      (let text = renderedBrokerd config; in
        lib.hasInfix "headers = { Authorization = \"Bearer {secret:github}\" }" text
        && lib.hasInfix "\n[log]\nlevel = \"debug\"\n" text))
    (check "no secrets: no LoadCredential=, no [[secrets]]"
      (!(noSecrets.systemd.services.boxmaker.serviceConfig ? LoadCredential)
        && !(noSecrets.services.boxmaker.brokerd.settings ? secrets)
        && !(lib.hasInfix "[[secrets]]" (renderedBrokerd noSecrets))))
    (check "brokerd.configFile: the credentials are still loaded, for the file's own [[secrets]]"
      (secretsConfigFile.LoadCredential == [ "github:/run/agenix/github" ]))
    (check "reload: SIGHUP to boxd's child brokerd, never to boxd (which has no handler)"
      (sc.ExecReload == "/nix/store/00000000000000000000000000000000-procps/bin/pkill --signal HUP --parent $MAINPID --exact brokerd"
        && noSecrets.systemd.services.boxmaker.serviceConfig.ExecReload == sc.ExecReload))
    (check "rpcServers: llama-server gets them as one --rpc, comma-separated"
      (lib.hasInfix "\"--rpc\", \"10.100.0.2:50052,10.100.0.3:50052\", \"-ngl\", \"99\"" (renderedBoxd withRpc.config)))
    (check "rpcServers: -ngl sends layers to the workers, so no GPU warning" (withRpc.raw.warnings == [ ]))
    (check "a llama.cpp built with RPC: no warning, for the head or the worker, and the worker runs it"
      (rpcBuilt.warnings == [ ] && lib.hasPrefix "${rpcBuild.outPath}/bin/" rpcBuilt.systemd.services.boxmaker-rpc-worker.serviceConfig.ExecStart))
    (check "no rpcServers: no --rpc" (!(lib.hasInfix "--rpc" (renderedBoxd config))))
    (check "llama-server keeps slot files in loopd's [kv] dir (<loopd's state dir>/kv), beside an explicit --parallel"
      (lib.hasInfix "\"--parallel\", \"3\", \"--slot-save-path\", \"/var/lib/boxmaker/loopd/kv\"" (renderedBoxd config)
        && lib.hasInfix "\"--state-dir\", \"/var/lib/boxmaker/loopd\"" (loopdArgs config)
        && !(cfg.loopd.settings ? kv)))
    (check "the slot files' directory is the boxmaker user's alone before boxd starts"
      (sc.ExecStartPre == "/nix/store/00000000000000000000000000000000-coreutils/bin/chmod 0700 /run/boxmaker/llama /var/lib/boxmaker/loopd/kv"
        && sc.User == "boxmaker"))
    (check "another stateDir moves the slot files with loopd's state"
      (lib.hasInfix "\"--slot-save-path\", \"/var/lib/box/main/loopd/kv\"" (renderedBoxd otherState)
        && lib.hasSuffix "/bin/chmod 0700 /run/boxmaker/llama /var/lib/box/main/loopd/kv" otherState.systemd.services.boxmaker.serviceConfig.ExecStartPre))
    (check "no rpcWorker: no worker unit, no open port"
      (!(config.systemd.services ? boxmaker-rpc-worker) && config.networking.firewall.allowedTCPPorts == [ ]))
    (check "rpcWorker: rpc-server on loopback at its port, with its threads"
      (wsc.ExecStart == "/nix/store/00000000000000000000000000000000-llama-cpp/bin/llama-rpc-server --host 127.0.0.1 --port 50100 --threads 1"))
    (check "rpcWorker: hardened (a dynamic user, no capabilities, read-only system, no W+X memory, IP only)"
      (wsc.DynamicUser && wsc.ProtectSystem == "strict" && wsc.NoNewPrivileges && wsc.PrivateTmp
        && wsc.CapabilityBoundingSet == "" && wsc.PrivateDevices && wsc.PrivateUsers && wsc.ProtectHome
        && wsc.MemoryDenyWriteExecute && wsc.RestrictNamespaces && wsc.ProcSubset == "pid"
        && wsc.RestrictAddressFamilies == [ "AF_INET" "AF_INET6" "AF_UNIX" ]
        && wsc.SystemCallFilter == [ "@system-service" "~@privileged" ]))
    (check "rpcWorker on loopback: the firewall stays shut, no address filter, no warning"
      (worker.networking.firewall.allowedTCPPorts == [ ] && !(wsc ? IPAddressDeny) && worker.warnings == [ ]))
    (check "rpcWorker.openFirewall opens the worker's port, and only it"
      (exposed.networking.firewall.allowedTCPPorts == [ 50052 ]))
    (check "rpcWorker on a tunnel's address: listens there, waits for the network, drops other clients"
      (esc.ExecStart == "/nix/store/00000000000000000000000000000000-llama-cpp/bin/llama-rpc-server --host 10.100.0.2 --port 50052"
        && builtins.elem "network-online.target" exposed.systemd.services.boxmaker-rpc-worker.wants
        && esc.IPAddressDeny == "any" && esc.IPAddressAllow == [ "localhost" "10.100.0.1/32" ]))
    (check "rpcWorker alone: the worker's unit without the appliance's"
      (workerOnly.systemd.services ? boxmaker-rpc-worker && !(workerOnly.systemd.services ? boxmaker)))
    (check "loopd gets --llama while there are no endpoints"
      (lib.hasInfix "\"--llama\", \"unix:${llamaSocket}\"" (loopdArgs config)))
    (check "[[llama.endpoints]]: no --llama and no [llama] url for loopd, the endpoints rendered"
      (let text = renderedLoopd withEndpoints; in
        !(lib.hasInfix "--llama" (loopdArgs withEndpoints))
        && !withEndpoints.services.boxmaker.loopd.passLlamaUrl
        && builtins.match "(.*\n)?url = \"unix:${llamaSocket}\"\n.*" text == null
        && lib.hasInfix "\n[[llama.endpoints]]\napi_key_file = \"/run/agenix/llama-key\"\n" text
        && lib.hasInfix "url = \"https://gpu.lan:8443\"\n" text
        && lib.hasInfix "slots = { main = [0, 1] }" text))
    (check "loopd.configFile with passLlamaUrl = false: no --llama"
      (!(lib.hasInfix "--llama" (loopdArgs configFileNoUrl))))
    (check "llama-server listens on a Unix socket, not on TCP, with its web UI off and no key"
      (let args = llamaArgs config; in
        lib.hasPrefix "[\"--host\", \"${llamaSocket}\", \"--no-webui\", \"-m\"" args
        && !(lib.hasInfix "\"--port\"" args) && !(lib.hasInfix "127.0.0.1" args)
        && !(lib.hasInfix "--api-key" args)
        && lib.hasInfix "\nready = { socket = \"${llamaSocket}\" }\n" (llamaChild config)
        && llamaCredentials sc == [ ]))
    (check "the socket's directory is a RuntimeDirectory of the boxmaker user's alone (0700) before boxd starts"
      (sc.RuntimeDirectory == "boxmaker boxmaker/llama" && sc.RuntimeDirectoryMode == "0750"
        && lib.hasInfix "/bin/chmod 0700 /run/boxmaker/llama " sc.ExecStartPre
        && sc.User == "boxmaker" && sc.Group == "boxmaker"))
    (check "a socket an earlier llama-server left is removed before it starts (it never replaces one)"
      (let script = builtins.readFile (llamaCommand config); in
        lib.hasInfix "\nrm -f -- ${llamaSocket}\n" script
        && lib.hasInfix "\nexec /nix/store/00000000000000000000000000000000-llama-cpp/bin/llama-server \"$@\"\n" script))
    (check "loopd reaches llama-server on its socket, with no key, and waits for the model longer than llama-server may load"
      (cfg.llama.url == "unix:${llamaSocket}"
        && lib.hasInfix "\n[llama]\nretry_max_attempts = 3\nurl = \"unix:${llamaSocket}\"\n" (renderedLoopd config)
        && !(lib.hasInfix "api_key_file" (renderedLoopd config))
        && startTimeout "loopd" config > startTimeout "llama-server" config))
    (check "an RPC head keeps its socket: --rpc connects out to the workers"
      (lib.hasPrefix "[\"--host\", \"${llamaSocket}\", \"--no-webui\"" (llamaArgs withRpc.config)
        && !(lib.hasInfix "\"--port\"" (llamaArgs withRpc.config))))
    (check "llama.host: TCP with --api-key-file from the unit's credential, its web UI off"
      (lib.hasPrefix "[\"--host\", \"127.0.0.1\", \"--port\", \"8081\", \"--api-key-file\", \"${llamaKey}\", \"--no-webui\", \"-m\"" (llamaArgs tcpKeyed)
        && llamaCredentials tcpSc == [ "llama-api-key:/run/agenix/llama-key" ]
        && builtins.elem "github:/run/agenix/github" tcpSc.LoadCredential
        && lib.hasInfix "\nready = { http = \"http://127.0.0.1:8081/health\" }\n" (llamaChild tcpKeyed)
        && llamaCommand tcpKeyed == "/nix/store/00000000000000000000000000000000-llama-cpp/bin/llama-server"
        && tcpSc.RuntimeDirectory == "boxmaker"
        && !(lib.hasInfix "/run/boxmaker/llama" tcpSc.ExecStartPre)))
    (check "llama.host: loopd sends the key, read from the credential"
      (tcpKeyed.services.boxmaker.loopd.settings.llama.api_key_file == llamaKey
        && tcpKeyed.services.boxmaker.llama.url == "http://127.0.0.1:8081"
        && lib.hasInfix "\n[llama]\napi_key_file = \"${llamaKey}\"\nretry_max_attempts = 3\nurl = \"http://127.0.0.1:8081\"\n" (renderedLoopd tcpKeyed)
        && lib.hasInfix "\"--llama\", \"http://127.0.0.1:8081\"" (loopdArgs tcpKeyed)))
    (check "llama.apiKeyFile on the socket: llama-server asks for the key there too, and loopd sends it"
      (lib.hasPrefix "[\"--host\", \"${llamaSocket}\", \"--api-key-file\", \"${llamaKey}\", \"--no-webui\"" (llamaArgs socketKeyed)
        && socketKeyed.services.boxmaker.loopd.settings.llama.api_key_file == llamaKey
        && llamaCredentials socketKeyed.systemd.services.boxmaker.serviceConfig == [ "llama-api-key:/run/agenix/llama-key" ]))
    (check "llama.host = \"::1\": loopd's URL brackets it"
      (ipv6.services.boxmaker.llama.url == "http://[::1]:8080"
        && lib.hasInfix "\nready = { http = \"http://[::1]:8080/health\" }\n" (llamaChild ipv6)))
    (check "[[llama.endpoints]] with a key: the module writes no [llama] api_key_file (the endpoints name theirs)"
      (let e = (evalBox { user = user // { llama.apiKeyFile = "/run/agenix/llama-key"; loopd.settings.llama.endpoints = endpoints; }; }).config; in
        e.services.boxmaker.loopd.settings.llama.api_key_file == null
        && !(lib.hasInfix "api_key_file" (builtins.head (builtins.match ".*\n\\[llama]\n([^[]*).*" (renderedLoopd e))))
        && lib.hasInfix "\n[[llama.endpoints]]\napi_key_file = \"/run/agenix/llama-key\"\n" (renderedLoopd e)))
    (check "chat: chatd in a unit of its own, with a user of its own, in loopd's group, its credential by LoadCredential"
      (csc.User == "boxmaker-chat" && csc.Group == "boxmaker-chat"
        && csc.SupplementaryGroups == [ "boxmaker" ]
        && csc.LoadCredential == [ "matrix-password:/run/agenix/matrix-box" ]
        && csc.StateDirectory == "boxmaker-chat" && csc.StateDirectoryMode == "0700"
        && csc.NoNewPrivileges && csc.ProtectSystem == "strict" && csc.MemoryDenyWriteExecute
        && chat.users.users.boxmaker-chat.isSystemUser
        && lib.hasSuffix "/chatd.toml" csc.ExecStart
        && builtins.elem "boxmaker.service" chat.systemd.services.boxmaker-chat.after))
    (check "chat: chatd.toml names the credential under $CREDENTIALS_DIRECTORY, loopd's socket and the pinned device"
      (let t = renderedChatd chat; in
        lib.hasInfix "loopd_socket = \"/run/boxmaker/loopd.sock\"" t
        && lib.hasInfix "password_file = \"matrix-password\"" t
        && lib.hasInfix "notify_room = \"!abc:example.org\"" t
        && lib.hasInfix matrixKey t))
    (check "chat: an access token instead of a password"
      (let c = chatOf { accessTokenFile = "/run/agenix/matrix-token"; }; in
        c.systemd.services.boxmaker-chat.serviceConfig.LoadCredential == [ "matrix-token:/run/agenix/matrix-token" ]
        && lib.hasInfix "access_token_file = \"matrix-token\"" (renderedChatd c)))
    (check "chat off: no unit and no user for it"
      (!(config.systemd.services ? boxmaker-chat) && !(config.users.users ? boxmaker-chat)))
    (check "disabled: no unit, user or package"
      (disabled.systemd.services == { } && disabled.users.users == { } && disabled.environment.systemPackages == [ ]))
  ];
in
builtins.seq (builtins.all (x: x) checks) {
  serviceConfig = sc;
  configScript = configs.script;
  chatScript = chat.services.boxmaker.chat.matrix.configDir.script;
  loopdSettings = cfg.loopd.settings;
  brokerdGrants = builtins.length cfg.grants;
}
