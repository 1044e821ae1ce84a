//! `stacklens compact` and `stacklens reindex`: one compaction pass over a store.

use crate::runs::compact::{Compactor, LEASE_SECS};

use super::common::CliError;

/// `stacklens compact` (`reindex`: every block made again): one pass, its outcome printed.
pub(super) fn compact(store: &str, memory_budget: Option<usize>, rebuild: bool) -> Result<(), CliError> {
    let failed = |e: &dyn std::fmt::Display| CliError::Serve(format!("compaction: {e}"));
    let store = crate::store::Store::open(store, std::time::Duration::from_secs(60)).map_err(|e| failed(&e))?;
    let total = memory_budget.map_or_else(crate::budget::default_total, |b| b as u64);
    // One pass at a time: nothing waits in a queue.
    let budget = crate::budget::Budget::new(total, total / 2, 1, std::time::Duration::from_secs(600));
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| failed(&e))?;
    let compactor =
        if rebuild { Compactor::rebuilding(LEASE_SECS) } else { Compactor::new(LEASE_SECS, Default::default()) };
    let pass =
        runtime.block_on(compactor.pass(&store, &budget, crate::records::now_millis())).map_err(|e| failed(&e))?;
    println!(
        "stacklens: {} blocks written holding {} profiles ({} bytes); {} day blocks written ({} bytes); \
         {} hours or days changed meanwhile (made next pass); {} tenants compacted by another replica",
        pass.blocks, pass.profiles, pass.bytes, pass.day_blocks, pass.day_bytes, pass.raced, pass.tenants_busy
    );
    Ok(())
}
