{
  description = "boxmaker: a private AI-agent appliance (boxd, loopd, brokerd, boxctl)";

  # No flake.lock is committed (it cannot be made offline): run `nix flake lock` once, then
  # `nix flake update` to upgrade. See docs/operations.md.
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});

      # package.nix: only the real binaries, the chat templates, completions and man pages.
      boxmakerFor = pkgs: pkgs.callPackage ./package.nix {
        gitCommit = self.rev or self.dirtyRev or "unknown";
      };

      # The models services.boxmaker.model knows by name (nixos-module/models.nix): plain data.
      models = import ./nixos-module/models.nix;
    in
    {
      overlays.default = _final: prev: { boxmaker = boxmakerFor prev; };

      # The catalogue: each entry's URL, sha256 (null: the owner pins it), chat template, context
      # size and llama-server flags. `services.boxmaker.model = "qwen2.5-coder-0.5b"` picks one;
      # `boxmaker.lib.models."<name>" // { sha256 = "..."; }` pins one that has no sha256.
      lib.models = models;

      nixosModules.default = { pkgs, ... }: {
        imports = [ ./nixos-module ];
        services.boxmaker.package = nixpkgs.lib.mkDefault (boxmakerFor pkgs);
      };

      packages = forAll (pkgs: { default = boxmakerFor pkgs; boxmaker = boxmakerFor pkgs; });

      # The pinned models as fixed-output derivations (what the module fetches):
      # `nix build '.#models."qwen2.5-coder-0.5b"'`.
      legacyPackages = forAll (pkgs: {
        models = nixpkgs.lib.mapAttrs
          (import ./nixos-module/fetch-model.nix { inherit (pkgs) fetchurl; })
          (nixpkgs.lib.filterAttrs (_: e: e.sha256 != null) models);
      });

      # `nix fmt`.
      formatter = forAll (pkgs: pkgs.nixfmt-rfc-style);

      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          packages = with pkgs; [ cargo rustc clippy rustfmt rust-analyzer cmake gcc nodejs nix deadnix nixfmt-rfc-style ];
          # rust-analyzer finds the standard library's sources here.
          RUST_SRC_PATH = "${pkgs.rustPlatform.rustLibSrc}";
        };
      });

      checks = forAll (pkgs:
        let
          boxmaker = boxmakerFor pkgs;

          # A system with the module, to inspect the unit without booting it.
          evalSystem = nixpkgs.lib.nixosSystem {
            inherit (pkgs.stdenv.hostPlatform) system;
            modules = [
              self.nixosModules.default
              {
                boot.isContainer = true;
                system.stateVersion = "25.05";
                services.boxmaker = { enable = true; model = "/var/lib/models/test.gguf"; };
              }
            ];
          };
          sc = evalSystem.config.systemd.services.boxmaker.serviceConfig;
          want = {
            Type = "notify";
            KillMode = "mixed";
            ProtectSystem = "strict";
            NoNewPrivileges = true;
            CapabilityBoundingSet = "";
            PrivateTmp = true;
            ProtectHome = true;
            RestrictAddressFamilies = [ "AF_INET" "AF_INET6" "AF_UNIX" ];
            UMask = "0077";
            WatchdogSec = "60s";
          };
          bad = builtins.filter (k: (sc.${k} or null) != want.${k}) (builtins.attrNames want);
        in
        {
          package = boxmaker;

          cargo-test = boxmaker.overrideAttrs (_: {
            doCheck = true;
            # Only the crates whose tests need no llama-server, model or network.
            checkPhase = "cargo test --locked -p bxcore -p proto -p bxconfig -p boxd";
          });

          hardening =
            assert builtins.elem "@system-service" sc.SystemCallFilter;
            if bad == [ ] then pkgs.runCommand "boxmaker-hardening" { } "touch $out"
            else throw "boxmaker unit lacks hardening: ${builtins.toJSON bad}";

          # Builds the checked configs (the three --check-config runs and the pins).
          config = evalSystem.config.services.boxmaker.configDir;

          # Parse and deadnix, as scripts/nix-checks.sh does; the script gives nix-instantiate a
          # writable NIX_STATE_DIR under $TMPDIR, which the build sandbox needs.
          offline = pkgs.runCommand "boxmaker-offline-nix-checks"
            { nativeBuildInputs = [ pkgs.nix pkgs.deadnix ]; } ''
            cd ${./.}
            bash tests/nix/offline-check.sh $(find . -name '*.nix')
            touch $out
          '';

          # Boots the appliance in a NixOS VM with fakellama as its llama-server (no model, GPU
          # or network): a task with a tool, an approval, a schedule, a reboot, the sessions
          # found again (tests/nix/vm-test.nix; docs/operations.md, "Nix checks").
          vm = import ./tests/nix/vm-test.nix {
            inherit pkgs;
            module = self.nixosModules.default;
            package = boxmaker;
          };
        });
    };
}
