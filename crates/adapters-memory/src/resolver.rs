//! The system's resolver (`getaddrinfo`, on tokio's blocking pool), for webhook endpoints.

use async_trait::async_trait;
use goods_domain::InfraError;
use goods_domain::ports::AddressResolver;
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

#[async_trait]
impl AddressResolver for SystemResolver {
    async fn resolve(&self, host: &str, port: u16) -> Result<Vec<IpAddr>, InfraError> {
        let addresses: Vec<IpAddr> = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| InfraError::msg(format!("{host} does not resolve: {e}")))?
            .map(|a| a.ip())
            .collect();
        if addresses.is_empty() {
            return Err(InfraError::msg(format!("{host} has no address")));
        }
        Ok(addresses)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_literal_address_is_itself_and_localhost_is_loopback() {
        let r = SystemResolver;
        assert_eq!(
            r.resolve("192.0.2.7", 443).await.unwrap(),
            ["192.0.2.7".parse::<IpAddr>().unwrap()]
        );
        let local = r.resolve("localhost", 443).await.unwrap();
        assert!(local.iter().all(IpAddr::is_loopback), "{local:?}");
        assert!(r.resolve("no-such-host.invalid", 443).await.is_err());
    }
}
