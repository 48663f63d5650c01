//! The model fakellama pretends to serve, as llama-server names it.

/// The model file fakellama pretends to serve unless told otherwise
/// ([`crate::Options::model_path`]): `/props` `model_path`, and the `model` of every answer
/// (llama-server answers with its model, whatever the request asks for).
pub const MODEL_PATH: &str = "/models/fakellama.gguf";
/// The default `model_alias` reported by `/props` and id in `/v1/models`: the model path, as
/// llama-server started without `--alias` reports.
pub const MODEL_ALIAS: &str = MODEL_PATH;
