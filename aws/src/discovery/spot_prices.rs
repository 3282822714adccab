//! Spot prices from DescribeSpotPriceHistory (Linux/UNIX, the latest per type and zone): each
//! zone's own price, as Karpenter prices spot offerings per zone. An answer where every price is
//! the same (moto's placeholder) or that is empty is not a price list: the caller keeps the
//! bundled spot advisor estimate and says so.

use crate::calls::Calls;
use crate::error::{from_sdk, AwsError};
use aws_sdk_ec2::types::Filter;
use std::collections::{BTreeMap, BTreeSet};

/// Why a DescribeSpotPriceHistory answer is not a price list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnusableSpotPrices {
    #[error("DescribeSpotPriceHistory returned no prices")]
    Empty,
    #[error("DescribeSpotPriceHistory returned one price for every type (a placeholder)")]
    Placeholder,
}

/// Instance type → zone → hourly spot price.
pub type SpotPrices = BTreeMap<String, BTreeMap<String, f64>>;

const ACTION: &str = "DescribeSpotPriceHistory";

/// Spot prices by type and zone, or why the answer is not usable.
pub async fn spot_prices(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
) -> Result<Result<SpotPrices, UnusableSpotPrices>, AwsError> {
    let now = aws_sdk_ec2::primitives::DateTime::from(std::time::SystemTime::now());
    let pages = calls
        .pages(
            ACTION,
            100,
            |token| async move {
                ec2.describe_spot_price_history()
                    .filters(
                        Filter::builder()
                            .name("product-description")
                            .values("Linux/UNIX")
                            .build(),
                    )
                    .start_time(now)
                    .set_next_token(token)
                    .max_results(1000)
                    .send()
                    .await
                    .map_err(|e| from_sdk(ACTION, e))
            },
            |p| p.next_token(),
        )
        .await?;
    // Per (type, zone) the price with the latest timestamp is the current one.
    let mut latest: BTreeMap<(String, String), (i64, f64)> = BTreeMap::new();
    for p in pages.iter().flat_map(|p| p.spot_price_history()) {
        let (Some(t), Some(zone), Some(price)) =
            (p.instance_type(), p.availability_zone(), p.spot_price())
        else {
            continue;
        };
        let Ok(v) = price.parse::<f64>() else {
            tracing::warn!(
                instance_type = t.as_str(),
                zone,
                price,
                "unreadable spot price skipped"
            );
            continue;
        };
        if !v.is_finite() || v < 0.0 {
            continue;
        }
        let at = p.timestamp().and_then(|t| t.to_millis().ok()).unwrap_or(0);
        let e = latest
            .entry((t.as_str().to_string(), zone.to_string()))
            .or_insert((at, v));
        if at > e.0 {
            *e = (at, v);
        }
    }
    let mut prices: SpotPrices = BTreeMap::new();
    for ((t, zone), (_, v)) in latest {
        prices.entry(t).or_default().insert(zone, v);
    }
    let distinct: BTreeSet<u64> = prices
        .values()
        .flat_map(|z| z.values())
        .map(|p| p.to_bits())
        .collect();
    if prices.is_empty() {
        return Ok(Err(UnusableSpotPrices::Empty));
    }
    if prices.len() > 1 && distinct.len() == 1 {
        return Ok(Err(UnusableSpotPrices::Placeholder));
    }
    Ok(Ok(prices))
}
