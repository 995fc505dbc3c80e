//! `lessgate inspect`: turns wire bytes into readable JSON and back.

use clap::Args;

#[derive(Debug, Args)]
pub struct InspectArgs {}

pub fn run(_args: InspectArgs) -> Result<(), Box<dyn std::error::Error>> {
    Err("inspect is not built yet".into())
}
