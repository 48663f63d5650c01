//! fakellama in-process for the tests that run the daemon: the server on a runtime of its own.

/// A fakellama server and the runtime it runs on. The server is dropped first.
pub struct Fake {
    pub server: fakellama::Handle,
    pub rt: tokio::runtime::Runtime,
}

impl Fake {
    pub fn start(options: fakellama::Options) -> Fake {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(fakellama::start(options)).unwrap();
        Fake { server, rt }
    }

    pub fn script(toml: &str) -> Fake {
        Fake::start(fakellama::Options {
            script: fakellama::Script::parse(toml).unwrap(),
            ..Default::default()
        })
    }
}
