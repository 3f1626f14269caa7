//! Errors shared by the value types and the ports.

use std::fmt;

/// A value that failed its parsing constructor. `field` names the offending input in the
/// vocabulary of the API (camelCase), so the HTTP edge can report it as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ValidationError {
    /// The API field the value came from.
    pub field: &'static str,
    /// What is wrong with it, for humans.
    pub message: String,
}

impl ValidationError {
    /// Builds a validation error for `field`.
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        Self {
            field,
            message: message.into(),
        }
    }
}

/// An infrastructure failure behind a port, wrapped by the adapter with its context (ports know
/// no `anyhow` nor adapter types); the use case decides what it means.
pub struct InfraError {
    context: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    unavailable: bool,
}

impl InfraError {
    /// A failure described by `context` alone.
    pub fn msg(context: impl Into<String>) -> Self {
        Self {
            context: context.into(),
            source: None,
            unavailable: false,
        }
    }

    /// A failure caused by `source`, described by `context`.
    pub fn new(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self {
            context: context.into(),
            source: Some(Box::new(source)),
            unavailable: false,
        }
    }

    /// The store did not answer within its bound (pool acquire, statement or transaction
    /// timeout): the caller may retry later. The outcome of a write is unknown.
    pub fn unavailable(context: impl Into<String>) -> Self {
        Self {
            context: context.into(),
            source: None,
            unavailable: true,
        }
    }

    /// Whether this is a bound that ran out ([`InfraError::unavailable`]) rather than a fault.
    pub fn is_unavailable(&self) -> bool {
        self.unavailable
    }
}

impl From<std::convert::Infallible> for InfraError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

impl fmt::Display for InfraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.context)
    }
}

impl fmt::Debug for InfraError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source:?}", self.context),
            None => f.write_str(&self.context),
        }
    }
}

impl std::error::Error for InfraError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}
