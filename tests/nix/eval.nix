# Evaluates nixos-module/default.nix as NixOS does, with nixpkgs' real lib
# (tests/nix/nixpkgs-lib) and the NixOS declarations of tests/nix/stand-in.nix: option types are
# checked by lib, and failed assertions stop the evaluation with NixOS's "Failed assertions:".
{ binDir }:
let
  lib = import ./nixpkgs-lib/lib;
in
{
  inherit lib;

  # user: the definitions of services.boxmaker; withBoxmaker: whether pkgs has the flake's
  # overlay (pkgs.boxmaker).
  evalBox = { user, withBoxmaker ? true }:
    let
      standIn = import ./stand-in.nix { inherit lib binDir withBoxmaker; };
      evaluated = lib.evalModules {
        modules = [
          standIn.nixosModule
          ../../nixos-module/default.nix
          { _module.args.pkgs = standIn.pkgs; services.boxmaker = user; }
        ];
      };
      inherit (evaluated) config;
    in
    {
      inherit (evaluated) options;
      # The config as the module made it, warnings unprinted: for checks of the warnings.
      raw = config;
      # NixOS checks the assertions and prints the warnings before it builds the system.
      config = lib.asserts.checkAssertWarn config.assertions config.warnings config;
    };
}
