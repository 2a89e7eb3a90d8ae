//! One broken rule of a RunPlan, as the engine reports it to the scenario check: the field it is
//! about, why, and the other fields it reads. Its own module so that the rules can live beside the
//! code they are about (validate.rs for the common ones, each pacing mode's file for its own).
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Problem {
    pub field: String,
    pub message: String,
    pub related: Vec<String>,
}

pub fn problem(field: &str, message: impl Into<String>, related: &[&str]) -> Problem {
    Problem { field: field.into(), message: message.into(), related: related.iter().map(|r| r.to_string()).collect() }
}

/// Milliseconds as the scenario writes seconds: 5000 → "5", 1500 → "1.5".
pub fn seconds(ms: u64) -> String {
    let text = format!("{:.3}", ms as f64 / 1000.0);
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A number as Python's `:g` writes it for the sizes here: 16.0 → "16", 15.5 → "15.5".
pub fn number(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}
