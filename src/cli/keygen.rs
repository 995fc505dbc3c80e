//! `lessgate keygen`: creates a node's peer-link identity and prints the
//! fingerprint that peers pin (docs/peer-link.md §3); with `--show`, prints
//! the fingerprint of the identity already in the directory.

use std::path::PathBuf;

use clap::Args;

use crate::transport::identity;
use crate::transport::tls::PairError;

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Directory for NAME.cert.pem and NAME.key.pem (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// File name stem of the certificate and key.
    #[arg(long, default_value = "node")]
    pub name: String,
    /// The node's name (`[node] name`) for the certificate's subject, so
    /// the certificate says whose it is; default: `--name`.
    #[arg(long, value_name = "NAME", conflicts_with = "show")]
    pub node_name: Option<String>,
    /// Replace existing files instead of refusing.
    #[arg(long, conflicts_with = "show")]
    pub force: bool,
    /// Print the fingerprint of the existing NAME.cert.pem instead of
    /// creating anything (the key, when readable, is checked to match).
    #[arg(long)]
    pub show: bool,
}

/// Writes the identity (or reads it, `--show`) and prints the fingerprint
/// on stdout (alone on its line, so scripts can capture it) and the file
/// paths on stderr.
pub fn run(args: KeygenArgs) -> Result<(), Box<dyn std::error::Error>> {
    if args.name.is_empty()
        || !args
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
    {
        return Err("--name must be letters, digits, '-', '_' or '.'".into());
    }
    if args.show {
        return show(&args);
    }
    let subject = args.node_name.as_deref().unwrap_or(&args.name);
    if subject.is_empty() || subject.len() > 64 || subject.chars().any(char::is_control) {
        return Err(
            "--node-name must be 1 to 64 characters, none of them control characters".into(),
        );
    }
    let (cert, key, fingerprint) =
        identity::generate_for_node_into(&args.dir, &args.name, subject, args.force)?;
    eprintln!("certificate: {}", cert.display());
    eprintln!("private key: {}", key.display());
    println!("{fingerprint}");
    Ok(())
}

/// The existing identity's fingerprint. A key that is not the
/// certificate's is an error (peers would pin a certificate the node
/// cannot use); a key this user may not read is only mentioned, so an
/// operator can show a fingerprint without root.
fn show(args: &KeygenArgs) -> Result<(), Box<dyn std::error::Error>> {
    let (cert, key) = identity::identity_paths(&args.dir, &args.name);
    if !cert.exists() {
        return Err(format!(
            "{}: no certificate here (create one with `lessgate keygen --dir {} --name {}`)",
            cert.display(),
            args.dir.display(),
            args.name
        )
        .into());
    }
    let fingerprint = identity::certificate_fingerprint(&cert)?;
    eprintln!("certificate: {}", cert.display());
    match identity::load(&cert, &key) {
        Ok(_) => eprintln!("private key: {} (matches)", key.display()),
        Err(error @ PairError::Mismatch { .. }) => {
            return Err(format!("{error}: make a new pair with `lessgate keygen --force`").into())
        }
        Err(error) => eprintln!("private key: not checked: {error}"),
    }
    println!("{fingerprint}");
    Ok(())
}
