//! `lessgate keygen`: creates a node's peer-link identity and prints the
//! fingerprint that peers pin (docs/peer-link.md §3).

use std::path::PathBuf;

use clap::Args;

use crate::transport::identity;

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Directory for NAME.cert.pem and NAME.key.pem (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// File name stem and the certificate's subject name.
    #[arg(long, default_value = "node")]
    pub name: String,
    /// Replace existing files instead of refusing.
    #[arg(long)]
    pub force: bool,
}

/// Writes the identity and prints the fingerprint on stdout (alone on its
/// line, so scripts can capture it) and the file paths on stderr.
pub fn run(args: KeygenArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.name.is_empty()
        || !args
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err("--name must be letters, digits, '-', '_' or '.'".into());
    }
    let (cert, key, fingerprint) = identity::generate_into(&args.dir, &args.name, args.force)?;
    eprintln!("certificate: {}", cert.display());
    eprintln!("private key: {}", key.display());
    println!("{fingerprint}");
    Ok(())
}
