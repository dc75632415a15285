"""Decision-making applications built on the correlated multinomial model."""
