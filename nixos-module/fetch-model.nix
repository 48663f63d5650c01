# A model of the catalogue (models.nix) as a fixed-output derivation: `name` is the entry's
# name, `entry` the entry with its sha256. The derivation carries the entry (passthru.boxmaker),
# so services.boxmaker.model = <it> gets the template and settings as the name would. Used by
# model.nix and the flake's legacyPackages.<system>.models.
{ fetchurl }:
name: entry:
fetchurl {
  name = entry.file;
  inherit (entry) url sha256;
  passthru.boxmaker = entry // { inherit name; };
}
