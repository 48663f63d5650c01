# boxmaker as a nixpkgs-style package: `pkgs.callPackage ./package.nix { }` (the flake's
# packages.<system>.default, overlays.default and nixosModules.default use it).
{
  lib,
  stdenv,
  rustPlatform,
  installShellFiles,
  # The commit the build is of, for the daemons' *_build_info metric (the flake passes its own
  # revision); "unknown" for a build from a tree without one.
  gitCommit ? "unknown",
}:

let
  cargoToml = lib.importTOML ./Cargo.toml;

  # The daemons (chatd, the Matrix channel, among them), the CLI, and the exec tool's sandbox
  # shim, which brokerd runs from beside its own executable. Nothing else: fakellama,
  # boxd-test-child, brokerd-test-mcp and boxeval are the tests' and the evaluation suite's, and
  # stay off the users' PATH.
  bins = [ "boxd" "loopd" "brokerd" "boxctl" "chatd" "bxsandbox-shim" ];
  testBins = [ "fakellama" "boxd-test-child" "brokerd-test-mcp" "boxeval" ];
in
rustPlatform.buildRustPackage {
  pname = "boxmaker";
  inherit (cargoToml.workspace.package) version;

  # The workspace (its `tests` member too), and config/: compact.md is compiled into loopd, and
  # the chat templates are installed below. The docs and evals/ are for the tests' checks.
  src = lib.fileset.toSource {
    root = ./.;
    fileset = lib.fileset.unions [
      ./Cargo.toml
      ./Cargo.lock
      ./clippy.toml
      ./crates
      ./tests
      ./config
      ./docs
      ./evals
    ];
  };
  cargoLock.lockFile = ./Cargo.lock;
  cargoBuildFlags = map (b: "--bin=${b}") bins;

  nativeBuildInputs = [ installShellFiles ];

  # The tests need llama-server, models and npm packages: they run in the flake's
  # checks.cargo-test (the fast ones) and in scripts/test.sh (all of them).
  doCheck = false;
  env.BOXMAKER_GIT_COMMIT = gitCommit;

  # The chat templates services.boxmaker.model's catalogue names (share/boxmaker/templates),
  # boxctl's shell completions and man pages (boxctl.1 and one per subcommand), written by the
  # boxctl just built, so only where the build machine can run it.
  postInstall = ''
    mkdir -p "$out/share/boxmaker"
    cp -r config/templates "$out/share/boxmaker/templates"
  '' + lib.optionalString (stdenv.buildPlatform.canExecute stdenv.hostPlatform) ''
    installShellCompletion --cmd boxctl \
      --bash <("$out/bin/boxctl" completions bash) \
      --fish <("$out/bin/boxctl" completions fish) \
      --zsh <("$out/bin/boxctl" completions zsh)
    mkdir -p man
    "$out/bin/boxctl" manpages man
    installManPage man/*.1
  '';

  # Every real binary is there, and no test binary is.
  doInstallCheck = true;
  installCheckPhase = ''
    runHook preInstallCheck
    for b in ${lib.escapeShellArgs bins}; do
      test -x "$out/bin/$b" || { echo "boxmaker: $out/bin/$b is missing" >&2; exit 1; }
    done
    for b in ${lib.escapeShellArgs testBins}; do
      test ! -e "$out/bin/$b" || { echo "boxmaker: $out/bin/$b is a test binary" >&2; exit 1; }
    done
    test -f "$out/share/boxmaker/templates/qwen2.5-tools.jinja"
    runHook postInstallCheck
  '';

  passthru = { inherit bins testBins; };

  meta = {
    description = "Private AI-agent appliance: a local model, persistent sessions, and tools under explicit grants";
    longDescription = ''
      boxd supervises llama-server, brokerd (every tool call under explicit grants, results
      labelled) and loopd (persistent sessions, turns of model and tool calls); boxctl drives
      it. Install it with the flake's NixOS module.
    '';
    # Cargo.toml's SPDX expression, "MIT OR Apache-2.0": either licence.
    license = map lib.getLicenseFromSpdxId (lib.splitString " OR " cargoToml.workspace.package.license);
    platforms = lib.platforms.linux;
    mainProgram = "boxctl";
  };
}
