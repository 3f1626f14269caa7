//! TLS to a database server, as configured (`DATABASE_TLS`, `DATABASE_TLS_CA_FILE`): plain data,
//! so the configuration reads it whichever backends the binary was built with.

/// How connections to the server are encrypted (`DATABASE_TLS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsMode {
    #[default]
    Off,
    /// Encrypted; the server's certificate is not checked.
    Required,
    /// Encrypted; the server's certificate must chain to the CA.
    VerifyCa,
    /// Encrypted; the certificate must chain to the CA and name the host connected to.
    VerifyIdentity,
}

/// TLS to the server: the mode, and the CA to verify it with (`DATABASE_TLS_CA_FILE`; without
/// one, the public web roots compiled into the driver). A mode the server cannot meet fails the
/// connection; nothing falls back to plaintext.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MysqlTls {
    pub mode: TlsMode,
    /// A PEM CA file.
    pub ca_file: Option<std::path::PathBuf>,
}
