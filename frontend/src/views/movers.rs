//! The server's top movers between two time ranges, beside the diff of their merged
//! profiles: the functions whose self share changed most.

use leptos::prelude::*;

use crate::app::state::State;

#[component]
pub fn TopMovers() -> impl IntoView {
    let state = expect_context::<State>();
    move || {
        let (base, compare) = (state.base_id.get()?, state.compare_id.get()?);
        let movers =
            state.range_movers.with(|m| m.as_ref().filter(|m| (m.0, m.1) == (base, compare)).map(|m| m.2.clone()))?;
        let rows = movers
            .into_iter()
            .map(|m| {
                let name = m.name.clone();
                let (worse, better) = (m.delta_pct > 0.0, m.delta_pct < 0.0);
                view! {
                    <tr data-testid="top-mover" data-name=m.name.clone() data-delta=m.delta_pct.to_string()>
                        <td>
                            <button class="link" title="select it" on:click=move |_| state.select(Some(name.clone()))>
                                {m.name.clone()}
                            </button>
                        </td>
                        <td class="num">{format!("{:.2}%", m.base_share_pct)}</td>
                        <td class="num">{format!("{:.2}%", m.compare_share_pct)}</td>
                        <td class="num" class:worse=worse class:better=better>{format!("{:+.2} pp", m.delta_pct)}</td>
                    </tr>
                }
            })
            .collect_view();
        Some(view! {
            <section class="top-movers" data-testid="top-movers" aria-label="top movers between the two ranges">
                <h4>"Top movers (self share, server)"</h4>
                <table class="data compact">
                    <thead><tr><th>"function"</th><th>"base"</th><th>"compare"</th><th>"change"</th></tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </section>
        })
    }
}
