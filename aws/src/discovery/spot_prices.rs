//! Spot prices from DescribeSpotPriceHistory (Linux/UNIX, the latest per type and zone), as a
//! saving over on-demand per type: the catalogue keeps one spot estimate per type, so the zones'
//! prices are averaged. An answer where every price is the same (moto's placeholder) or that is
//! empty is not a price list: the caller keeps the bundled spot advisor estimate and says so.

use crate::calls::Calls;
use crate::error::{from_sdk, AwsError};
use aws_sdk_ec2::types::Filter;
use dovetail_dataflow::catalog::TypeOfferings;
use std::collections::{BTreeMap, BTreeSet};

const ACTION: &str = "DescribeSpotPriceHistory";

/// Savings in percent by type, or why the answer is not usable.
pub async fn spot_savings(
    ec2: &aws_sdk_ec2::Client,
    calls: &Calls,
    offerings: &BTreeMap<String, TypeOfferings>,
) -> Result<Result<BTreeMap<String, f64>, String>, AwsError> {
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
    let mut prices: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for p in pages.iter().flat_map(|p| p.spot_price_history()) {
        let (Some(t), Some(price)) = (p.instance_type(), p.spot_price()) else {
            continue;
        };
        if let Ok(v) = price.parse::<f64>() {
            prices.entry(t.as_str().to_string()).or_default().push(v);
        }
    }
    let distinct: BTreeSet<u64> = prices.values().flatten().map(|p| p.to_bits()).collect();
    if prices.is_empty() {
        return Ok(Err(
            "DescribeSpotPriceHistory returned no prices".to_string()
        ));
    }
    if prices.len() > 1 && distinct.len() == 1 {
        return Ok(Err(
            "DescribeSpotPriceHistory returned one price for every type (a placeholder)"
                .to_string(),
        ));
    }
    let mut savings = BTreeMap::new();
    for (t, zone_prices) in prices {
        let Some(on_demand) = offerings.get(&t).and_then(|o| o.on_demand) else {
            continue;
        };
        if on_demand <= 0.0 || zone_prices.is_empty() {
            continue;
        }
        let mean = zone_prices.iter().sum::<f64>() / zone_prices.len() as f64;
        savings.insert(t, ((1.0 - mean / on_demand) * 100.0).clamp(0.0, 100.0));
    }
    Ok(Ok(savings))
}
