//! The one error every storage port returns. Backends translate their own errors into it at
//! the storage boundary, so the rules never see a driver type.

/// A storage failure, as the rules need to know it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness rule of the data was violated (a second user with the same name, say).
    #[error("conflicts with existing data")]
    Conflict,
    /// A guarded update found the row in another state than expected: someone else moved it.
    #[error("the record changed concurrently")]
    Stale,
    /// The database cannot be reached for now (down, restarting, out of connections, busy
    /// past its timeout): nothing was changed, and the same request may succeed later.
    #[error("the database is unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The database answered with an error.
    #[error("storage failure: {0}")]
    Backend(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Stored data could not be read back into a domain type (corruption or a bad migration).
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// The same failure again, for each of several callers of one failed write.
    pub fn repeated(&self) -> StoreError {
        let message = self.to_string();
        match self {
            StoreError::Conflict => StoreError::Conflict,
            StoreError::Stale => StoreError::Stale,
            StoreError::Unavailable(_) => StoreError::Unavailable(message.into()),
            StoreError::Backend(_) => StoreError::Backend(message.into()),
            StoreError::Corrupt(detail) => StoreError::Corrupt(detail.clone()),
        }
    }
}
