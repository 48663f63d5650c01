# A small stand-in for the parts of nixpkgs (lib, pkgs, the module system) that
# nixos-module/default.nix uses, so the module can be evaluated offline with a bare
# nix-instantiate. Not a faithful copy: types do not check values, and merging is "user
# definitions over option defaults", which is all the module needs.
{ binDir }:
let
  inherit (builtins) attrNames concatStringsSep isAttrs isList isString isBool
    isInt isFloat listToAttrs map filter match toJSON all;

  mkType = name: extra: { _type = "type"; inherit name; } // extra;

  types = {
    str = mkType "str" { };
    path = mkType "path" { };
    package = mkType "package" { };
    port = mkType "port" { };
    bool = mkType "bool" { };
    ints = { positive = mkType "positive" { }; };
    listOf = t: mkType "listOf" { elem = t; };
    nullOr = t: mkType "nullOr" { elem = t; };
    submodule = m: mkType "submodule" { options = m.options or { }; freeform = m ? freeformType; };
  };

  lib = {
    inherit types;
    mkOption = o: o // { _type = "option"; };
    mkEnableOption = what: { _type = "option"; type = types.bool; default = false; description = "Whether to enable ${what}."; };
    mkIf = condition: content: { _type = "if"; inherit condition content; };
    mkDefault = content: { _type = "override"; priority = 1000; inherit content; };
    optionals = c: l: if c then l else [ ];
  };

  # Strips mkIf/mkDefault wrappers from a config tree.
  unwrap = v:
    if isAttrs v && (v._type or null) == "if" then (if v.condition then unwrap v.content else { })
    else if isAttrs v && (v._type or null) == "override" then unwrap v.content
    else if isAttrs v && !(v ? outPath) then builtins.mapAttrs (_: unwrap) v
    else if isList v then map unwrap v
    else v;

  # Resolves an option tree against user definitions.
  resolve = opts: defs: freeform:
    let
      declared = listToAttrs (map (n: { name = n; value = resolveOne opts.${n} (defs ? ${n}) (defs.${n} or null); }) (attrNames opts));
      extra = if freeform then removeAttrs defs (attrNames opts) else
        (if removeAttrs defs (attrNames opts) == { } then { }
         else throw "stand-in: undeclared options ${toJSON (attrNames (removeAttrs defs (attrNames opts)))}");
    in extra // declared;

  resolveOne = opt: has: def:
    if (opt._type or null) == "option" then
      let
        value = if has then def else if opt ? default then opt.default
          else throw "stand-in: option without a value or default";
      in
      if opt.type.name == "submodule" then resolve opt.type.options (unwrap value) opt.type.freeform
      else unwrap value
    else resolve opt (if has then def else { }) false;

  # A small TOML writer: scalars, arrays, tables, arrays of tables (inline tables inside).
  bare = k: match "[A-Za-z0-9_-]+" k != null;
  key = k: if bare k then k else toJSON k;
  isTableList = v: isList v && v != [ ] && all isAttrs v;
  value = v:
    if isString v then toJSON v
    else if isBool v then (if v then "true" else "false")
    else if isInt v || isFloat v then toString v
    else if isList v then "[" + concatStringsSep ", " (map value v) + "]"
    else if isAttrs v && v ? outPath then toJSON "${v}"
    else if isAttrs v then "{ " + concatStringsSep ", " (map (k: "${key k} = ${value v.${k}}") (attrNames v)) + " }"
    else if v == null then throw "stand-in toTOML: null has no TOML form"
    else throw "stand-in toTOML: unsupported value";
  isTable = v: isAttrs v && !(v ? outPath);
  table = path: attrs:
    let
      names = attrNames attrs;
      scalars = filter (k: !(isTable attrs.${k}) && !(isTableList attrs.${k})) names;
      tables = filter (k: isTable attrs.${k}) names;
      tableLists = filter (k: isTableList attrs.${k}) names;
      p = k: if path == "" then key k else "${path}.${key k}";
    in
    concatStringsSep "" (map (k: "${key k} = ${value attrs.${k}}\n") scalars)
    + concatStringsSep "" (map (k: "\n[${p k}]\n" + table (p k) attrs.${k}) tables)
    + concatStringsSep "" (map (k: concatStringsSep "" (map (e:
        "\n[[${p k}]]\n" + concatStringsSep "" (map (n: "${key n} = ${value e.${n}}\n") (attrNames e))) attrs.${k})) tableLists);
  toTOML = table "";

  fake = name: { outPath = "/nix/store/00000000000000000000000000000000-${name}"; inherit name; };

  pkgs = {
    boxmaker = { outPath = binDir; name = "boxmaker"; };
    llama-cpp = fake "llama-cpp";
    formats.toml = _: {
      type = mkType "toml" { };
      generate = name: v: builtins.toFile name (toTOML v);
    };
    # Keeps the script, so the checks can run it (with $out set) against the debug build.
    runCommand = name: env: script: fake name // { inherit env script; };
  };
in
{
  inherit lib pkgs unwrap resolve toTOML;
}
