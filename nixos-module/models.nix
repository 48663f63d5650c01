# The catalogue of models services.boxmaker.model knows by name: plain data, no pkgs (the flake
# exposes it as lib.models, and each hashed entry as legacyPackages.<system>.models.<name>, a
# fixed-output derivation: pkgs.fetchurl with the URL and sha256 below).
#
# Each entry: the GGUF's URL and sha256 (an entry without one, as an owner may write, is refused
# until it is pinned: docs/operations.md, "A model from the catalogue"), its file name,
# the chat template it needs (a file of config/templates/, which the package installs under
# share/boxmaker/templates; null: the model's own), llama-server's total context (-c) for the
# module's three slots, and any other llama-server flags it needs.
{
  # The default: the model the demo, the tests and the evaluation suite run (docs/evals.md).
  # The sha256 is the one scripts/fetch-parts.sh pins (QWEN_SHA256, 491,400,064 bytes, computed
  # from the file it assembles); public catalogues list the same digest and size for this URL
  # (Hugging Face's LFS sha256 of Qwen's upload, revision ebb2015119c9), so the bytes are the same.
  "qwen2.5-coder-0.5b" = {
    description = "Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (469 MiB): the default, for CPUs";
    url = "https://huggingface.co/Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
    sha256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";
    file = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
    # Tool calls need it: without it this model leaves Qwen's call tags out and llama-server
    # finds no call (docs/real-model.md, "The tool-call template").
    template = "qwen2.5-tools.jinja";
    # 8192 tokens a slot (the model is trained on 32768).
    contextSize = 24576;
    llamaFlags = [ ];
  };

  # A larger one, for a box with more memory (1,117,320,768 bytes on disk, about 2 GB in use).
  # Its sha256 was not computed here from Hugging Face's file (nothing here can download it):
  # it is the digest public references give for this file of Qwen's official repository (its
  # LFS oid, upload commit 2ab9f8f42af0), with that size; where scripts/fetch-parts.sh pins a
  # copy of this model (QWEN15_SHA256), tests/nix/eval-owner.nix requires the same digest. A
  # wrong one would fail the fetch, never load other bytes.
  "qwen2.5-coder-1.5b" = {
    description = "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M (1.1 GB): stronger than the default, slower, more memory";
    url = "https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF/resolve/main/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
    sha256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046";
    file = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
    # The same chat format as the 0.5B (Qwen2.5's); the template was measured with the 0.5B only.
    template = "qwen2.5-tools.jinja";
    contextSize = 24576;
    llamaFlags = [ ];
  };
}
