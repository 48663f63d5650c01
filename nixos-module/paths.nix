# Where the unit's daemons listen: the sockets in the unit's RuntimeDirectory, for the group
# boxmaker (llama-server's own is in llama-server.nix). A plain file of values, imported by
# default.nix and options.nix, not a module.
rec {
  runDir = "/run/boxmaker";
  loopdSocket = "${runDir}/loopd.sock";
  brokerdSocket = "${runDir}/brokerd.sock";
  boxdSocket = "${runDir}/boxd.sock";
}
