package main

import (
	_ "github.com/apache/rocketmq-client-go/v2"
)

func main() {}
