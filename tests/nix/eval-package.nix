# package.nix evaluated offline with nixpkgs' real lib: buildRustPackage stands in as a function
# that returns what it was given, so the checks see the attributes a real build would get.
# Run: nix-instantiate --eval --strict --json tests/nix/eval-package.nix
# (scripts/nix-checks.sh also runs the install commands against the debug build.)
let
  lib = import ./nixpkgs-lib/lib;
  cargoToml = lib.importTOML ../../Cargo.toml;

  callWith = canExecute: import ../../package.nix {
    inherit lib;
    gitCommit = "0123456789abcdef0123456789abcdef01234567";
    stdenv = {
      buildPlatform.canExecute = _: canExecute;
      hostPlatform = { };
    };
    rustPlatform.buildRustPackage = attrs: attrs;
    installShellFiles = { type = "derivation"; name = "install-shell-files"; outPath = "/nix/store/00000000000000000000000000000000-install-shell-files"; };
  };
  pkg = callWith true;
  cross = callWith false;

  check = what: ok: if ok then true else throw "eval-package: ${what}";

  # Every [[bin]] of the workspace's crates (src/main.rs is the crate's own name).
  crates = builtins.attrNames (lib.filterAttrs (_: t: t == "directory") (builtins.readDir ../../crates));
  binsOf = c:
    let toml = lib.importTOML (../../crates + "/${c}/Cargo.toml"); in
    map (b: b.name) (toml.bin or [ ])
    ++ lib.optional (builtins.pathExists (../../crates + "/${c}/src/main.rs") && !(builtins.any (b: b.path or "" == "src/main.rs") (toml.bin or [ ]))) toml.package.name;
  allBins = lib.unique (builtins.concatMap binsOf crates);
  built = map (f: lib.removePrefix "--bin=" f) pkg.cargoBuildFlags;

  checks = [
    (check "version from Cargo.toml" (pkg.version == cargoToml.workspace.package.version && pkg.pname == "boxmaker"))
    (check "the build is told its commit, for the daemons' build_info metric"
      (pkg.env.BOXMAKER_GIT_COMMIT == "0123456789abcdef0123456789abcdef01234567"))
    (check "cargoLock.lockFile is the workspace's" (pkg.cargoLock.lockFile == ../../Cargo.lock))
    (check "only the real binaries are built: the daemons (chatd too), boxctl and the sandbox shim"
      (builtins.sort builtins.lessThan built == [ "boxctl" "boxd" "brokerd" "bxsandbox-shim" "chatd" "loopd" ]
        && builtins.all (f: lib.hasPrefix "--bin=" f) pkg.cargoBuildFlags))
    (check "every other binary of the workspace is a test binary the install check refuses"
      (builtins.sort builtins.lessThan (lib.subtractLists built allBins) == builtins.sort builtins.lessThan pkg.passthru.testBins
        && builtins.all (b: lib.hasInfix b pkg.installCheckPhase) pkg.passthru.testBins
        && lib.hasInfix "is a test binary" pkg.installCheckPhase && pkg.doInstallCheck))
    (check "the chat templates in share/boxmaker/templates"
      (lib.hasInfix "cp -r config/templates \"$out/share/boxmaker/templates\"" pkg.postInstall))
    (check "completions (installShellCompletion) for bash, zsh and fish, and man pages from boxctl"
      (builtins.all (s: lib.hasInfix "--${s} <(\"$out/bin/boxctl\" completions ${s})" pkg.postInstall) [ "bash" "zsh" "fish" ]
        && lib.hasInfix "installShellCompletion --cmd boxctl" pkg.postInstall
        && lib.hasInfix "\"$out/bin/boxctl\" manpages man\n" pkg.postInstall
        && lib.hasInfix "installManPage man/*.1" pkg.postInstall
        && builtins.elem "install-shell-files" (map (p: p.name) pkg.nativeBuildInputs)))
    (check "cross builds leave out what needs boxctl to run, and keep the templates"
      (!(lib.hasInfix "completions" cross.postInstall) && lib.hasInfix "templates" cross.postInstall))
    (check "meta: description, licence from Cargo.toml (MIT or Apache-2.0), Linux, boxctl"
      (pkg.meta.description != "" && pkg.meta.mainProgram == "boxctl" && pkg.meta.platforms == lib.platforms.linux
        && map (l: l.spdxId) pkg.meta.license == [ "MIT" "Apache-2.0" ]))
  ];
in
builtins.seq (builtins.all (x: x) checks) {
  inherit (pkg) postInstall installCheckPhase;
}
