//! Diagnostics go to stderr through `log`; `RUST_LOG=debug` shows more.
pub fn init() {
    let _ = env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp(None)
        .try_init();
}
