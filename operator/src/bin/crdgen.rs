//! Prints the IngestTenant CustomResourceDefinition as YAML:
//! `cargo run -p sluice-operator --bin crdgen > crds/ingesttenant.yaml`.
//! A test (`crd_yaml_is_up_to_date`) fails when the committed file drifts from the types.

use std::process::ExitCode;

fn main() -> ExitCode {
    match sluice_operator::crd::crd_yaml() {
        Ok(yaml) => {
            print!("{yaml}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("crdgen: {e}");
            ExitCode::FAILURE
        }
    }
}
