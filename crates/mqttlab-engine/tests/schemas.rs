//! The JSON Schemas of the engine's contract with the Python front, generated from the types
//! themselves and committed under docs/schema/: the RunPlan the engine accepts and the summary it
//! writes. A type changed without its committed schema fails here; set MQTTLAB_WRITE_SCHEMAS=1
//! to write the new one (and review the diff).
use mqttlab_engine::{RunPlan, Summary};
use schemars::schema_for;
use std::path::PathBuf;

fn check(file: &str, schema: schemars::schema::RootSchema) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/schema").join(file);
    let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
    if std::env::var_os("MQTTLAB_WRITE_SCHEMAS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(committed == text, "{} differs from the types; rerun with MQTTLAB_WRITE_SCHEMAS=1 and commit it", path.display());
}

#[test]
fn the_run_plan_schema_is_the_committed_one() {
    check("run-plan.schema.json", schema_for!(RunPlan));
}

#[test]
fn the_summary_schema_is_the_committed_one() {
    check("summary.schema.json", schema_for!(Summary));
}
