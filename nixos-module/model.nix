# services.boxmaker.model: the GGUF llama-server loads, by the name of a model of the catalogue
# (models.nix), as a catalogue entry (one pinned by the owner), as a derivation, or as a path.
# A catalogue model is a fixed-output derivation (pkgs.fetchurl with its URL and sha256) that
# boxd's config names, so it is in the system's closure: a switch to another model is one
# switch, and a rollback brings the earlier model back with the earlier generation. Its entry
# also gives llama-server's chat template (from the package's share/boxmaker/templates), its
# context size and any flags it needs (default.nix, options.nix).
{ config, lib, pkgs, ... }:

let
  cfg = config.services.boxmaker;
  inherit (lib) mkOption types;
  catalogue = import ./models.nix;
  names = builtins.attrNames catalogue;

  # A catalogue entry as an attribute set (not a derivation, which has an outPath).
  isEntry = v: builtins.isAttrs v && v ? url && !(v ? outPath);
  entryType = types.addCheck types.attrs isEntry;

  m = cfg.model;
  entry =
    if builtins.isString m && catalogue ? ${m} then catalogue.${m} // { name = m; }
    # An entry the owner wrote or pinned: what it leaves out is a plain model's.
    else if isEntry m then { name = m.file or "model.gguf"; file = "model.gguf"; sha256 = null; template = null; contextSize = 24576; llamaFlags = [ ]; } // m
    # A derivation of the flake's legacyPackages.<system>.models, which carries its entry.
    else if builtins.isAttrs m && m ? boxmaker then m.boxmaker
    else null;
  pinned = entry == null || entry.sha256 or null != null;
  unpinned = "services.boxmaker.model: the entry of ${entry.url} has no sha256, and the module fetches a model only by its sha256. Download the file once with `nix-prefetch-url ${entry.url}` (it prints the sha256) and add it to the entry: model = <the entry> // { sha256 = \"<what it printed>\"; } (docs/operations.md, \"A model from the catalogue\").";

  fetch = e: import ./fetch-model.nix { inherit (pkgs) fetchurl; } e.name e;

  file =
    if entry == null || builtins.isAttrs m && m ? outPath then m
    else if pinned then fetch entry
    else throw unpinned;
in
{
  options.services.boxmaker = {
    model = mkOption {
      type = types.oneOf [ (types.enum names) entryType types.path ] // {
        description = "name of a model of the catalogue (${lib.concatMapStringsSep ", " builtins.toJSON names}), catalogue entry, or absolute path";
      };
      example = "qwen2.5-coder-0.5b";
      description = ''
        The GGUF model llama-server loads: the name of a model of the catalogue (models.nix,
        the flake's lib.models: ${lib.concatStringsSep ", " names}), fetched into the store
        with its pinned sha256, with its chat template, context size and flags; a catalogue
        entry (lib.models.<name> // { sha256 = "..."; }, to pin one the catalogue does not);
        a derivation (pkgs.fetchurl { url = ...; hash = ...; }, in the store as well); or a
        string path outside the store (for example "/var/lib/models/qwen3-4b.gguf"), to keep
        a large model out of it. A path must be readable by the boxmaker user and not under
        /home (ProtectHome); only a model in the store comes back with a rollback.
      '';
    };

    modelEntry = mkOption {
      type = types.nullOr types.attrs;
      readOnly = true;
      internal = true;
      default = entry;
      defaultText = lib.literalMD "the catalogue entry `model` names, is, or was fetched from; else null";
      description = "The catalogue entry of the model (template, contextSize, llamaFlags), or null.";
    };

    modelFile = mkOption {
      type = types.path;
      readOnly = true;
      default = file;
      defaultText = lib.literalMD "the catalogue model's fixed-output derivation, or `model` itself";
      description = "The file llama-server loads (-m): in the store for a catalogue model or a derivation.";
    };
  };

  config = lib.mkIf cfg.enable {
    assertions = [
      {
        assertion = pinned;
        message = if pinned then "" else unpinned;
      }
    ];
  };
}
