# The systemd hardening the module's units share: the appliance's unit (default.nix) and the
# RPC worker's (rpc-worker.nix). A plain file of values, imported by both, not a module.
{ lib }:

rec {
  # The device nodes of llama.cpp's GPU backends (the list of nixpkgs' ollama module): NVIDIA
  # (CUDA), AMD (ROCm: /dev/kfd and /dev/dri), WSL's /dev/dxg.
  gpuDevices = [
    "char-nvidiactl"
    "char-nvidia-caps"
    "char-nvidia-frontend"
    "char-nvidia-uvm"
    "char-drm"
    "char-fb"
    "char-kfd"
    "/dev/dxg"
  ];

  # The hardening set of nixpkgs' services.llama-cpp, for a unit that runs llama.cpp on the CPU
  # or, with `gpu`, on the GPU. MemoryDenyWriteExecute is each unit's own (the appliance's
  # depends on its MCP servers).
  unit = gpu: {
    CapabilityBoundingSet = "";
    RestrictAddressFamilies = [ "AF_INET" "AF_INET6" "AF_UNIX" ];
    NoNewPrivileges = true;
    # gpu opens the GPU's nodes (DeviceAllow below); nothing else needs a device.
    PrivateDevices = !gpu;
    PrivateMounts = true;
    PrivateTmp = true;
    PrivateUsers = true;
    ProtectClock = true;
    ProtectControlGroups = true;
    ProtectHome = true;
    ProtectKernelLogs = true;
    ProtectKernelModules = true;
    ProtectKernelTunables = true;
    ProtectSystem = "strict";
    LockPersonality = true;
    RemoveIPC = true;
    RestrictNamespaces = true;
    RestrictRealtime = true;
    RestrictSUIDSGID = true;
    SystemCallArchitectures = "native";
    SystemCallFilter = [ "@system-service" "~@privileged" ];
    SystemCallErrorNumber = "EPERM";
    ProtectProc = "invisible";
    ProtectHostname = true;
    # CUDA reads /proc/driver/nvidia, which ProcSubset=pid hides.
    ProcSubset = if gpu then "all" else "pid";
  } // lib.optionalAttrs gpu {
    # Only the GPU's nodes (and /dev/null and the like, which "closed" keeps); ROCm opens
    # /dev/dri/renderD*, owned by the render group.
    DeviceAllow = gpuDevices;
    DevicePolicy = "closed";
    SupplementaryGroups = [ "render" ];
  };

  # What bubblewrap needs of the unit, for brokerd's `exec` tool (docs/operations.md,
  # "Hardening and exec"), found by running bwrap under each setting; everything else of the
  # hardening set stays. The sandbox's walls are its own: new user, pid, ipc, uts, cgroup, net
  # and mount namespaces, a fresh /proc, no capabilities, NoNewPrivs, Landlock.
  execRelaxed = {
    # `bwrap --unshare-all` makes exactly these (not "time"); none is an escape: the kernel
    # gives a process no capability outside a namespace it makes, and the unit has none.
    RestrictNamespaces = "cgroup ipc mnt net pid user uts";
    # bwrap mounts a fresh /proc for the sandbox's pid namespace; in a user namespace the
    # kernel allows that only while no /proc in the unit has a file hidden under another
    # mount. ProtectKernelTunables (/proc/sys read-only), ProtectKernelLogs (/proc/kmsg) and
    # ProtectHostname (/proc/sys/kernel/hostname, systemd 258) each put one there. The unit
    # has no capability and no root, so /proc/sys stays unwritable for it and /proc/kmsg
    # unreadable by their permissions; ~syslog below keeps the kernel log shut as
    # ProtectKernelLogs did.
    ProtectKernelTunables = false;
    ProtectKernelLogs = false;
    ProtectHostname = false;
    # bwrap reads /proc/sys/kernel/overflowuid to map users; ProcSubset=pid hides /proc/sys.
    # ProtectProc=invisible stays: other users' processes are still hidden.
    ProcSubset = "all";
    # bwrap's own set-up inside its namespaces: mount, umount2, pivot_root (@mount), capset
    # (dropping every capability); the shim's Landlock calls, and its seccomp filter that
    # lets a `programs` grant's program execute nothing else (not in @system-service).
    # @privileged stays denied otherwise, and the sandboxed program inherits this filter and
    # has no capability, so mount is of no use to it.
    SystemCallFilter = [ "@system-service" "~@privileged" "@mount" "capset" "landlock_create_ruleset" "landlock_add_rule" "landlock_restrict_self" "seccomp" "~syslog" ];
    # bwrap brings up the sandbox's loopback over rtnetlink.
    RestrictAddressFamilies = [ "AF_INET" "AF_INET6" "AF_UNIX" "AF_NETLINK" ];
  };

  # The one device brokerd's `exec` needs, for a grant with network = true: slirp4netns, the
  # sandbox network's only way out, opens the tun device to add `tap0` in the sandbox's own
  # network namespace. Bound into the unit's private /dev (if the host has it), and allowed by
  # the device policy beside the GPU's nodes; no other device is.
  execDevices = gpu: {
    BindPaths = [ "-/dev/net/tun" ];
    DeviceAllow = [ "/dev/net/tun rw" ] ++ lib.optionals gpu gpuDevices;
    DevicePolicy = "closed";
  };

  # Whether `package` was visibly built without llama.cpp's RPC backend: nixpkgs' llama-cpp
  # renders its rpcSupport argument as -DGGML_RPC:BOOL=TRUE or FALSE in cmakeFlags. A package
  # without cmakeFlags (built some other way) is given the benefit of the doubt.
  lacksRpc = package:
    let flags = package.cmakeFlags or null; in
    builtins.isList flags
    && !(builtins.any (f: builtins.match "-DGGML_RPC(:BOOL)?=(ON|TRUE|1)" (toString f) != null) flags);
}
