//! Profiled by Pyroscope's Rust agent as its documentation shows; only the address,
//! the token (basic auth is the agent's credential) and a short upload interval are the
//! test's. `stacklens-pyroscope-agent-test ADDRESS TOKEN SECONDS`.

use std::time::{Duration, Instant};

use pyroscope::backend::{pprof_backend, BackendConfig, PprofConfig};
use pyroscope::pyroscope::PyroscopeAgentBuilder;

#[inline(never)]
fn stacklens_hot_loop(until: Instant) -> u64 {
    let mut x = 0u64;
    while Instant::now() < until {
        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
    }
    x
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, address, token, seconds] = &args[..] else {
        return Err("usage: stacklens-pyroscope-agent-test ADDRESS TOKEN SECONDS".into());
    };
    let backend = pprof_backend(PprofConfig::default(), BackendConfig::default());
    let agent = PyroscopeAgentBuilder::new(address, "stacklens-rust-test", 100, "pyroscope-rs", "2.1.5", backend)
        .basic_auth("stacklens", token)
        .tags(vec![("team", "lens"), ("client", "rust")])
        .upload_interval(Duration::from_secs(1))
        .build()?;
    let running = agent.start()?;
    stacklens_hot_loop(Instant::now() + Duration::from_secs_f64(seconds.parse()?));
    running.stop()?.shutdown();
    println!("stopped");
    Ok(())
}
