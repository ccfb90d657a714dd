// Command go-scenarios drives the official Go client (github.com/apache/rocketmq-client-go/v2,
// pinned in go.mod) through one compat scenario and prints what happened as JSON lines.
//
//	go-scenarios SCENARIO --namesrv 127.0.0.1:P --topic T [--group G] [options]
//
// Scenarios:
//
//	send-sync | send-async | send-oneway   --count N --tags TagA,TagB (one message at a time)
//	send-batch                             --count N --batch-size B (SendSync with B messages)
//	                (all sends: --first F numbers the messages F .. F+N-1; --body-size pads bodies)
//	push-consume    --count N [--tag-expr EXPR | --sql-expr SQL92] [--consumers K] [--produce N --create-topic Q --broker ADDR]
//	                K push consumers (one client instance each) in --group; with --produce the
//	                topic is created with Q queues, the scenario waits until the consumers have
//	                split the queues ("balanced"), then sends N messages itself. --orderly: an
//	                orderly consumer (LOCK_BATCH_MQ, one queue's messages in offset order).
//	                --retry-first: every first delivery fails (redelivery via CONSUMER_SEND_MSG_BACK);
//	                then 2 N deliveries are expected.
//	pull-consume    --mode from|poll [--count N] [--tag-expr EXPR]
//	                from: PullFrom every queue from offset 0 until its max offset;
//	                poll: Poll/ACK (the pull consumer's own rebalancing) until N messages.
//	send-transaction --count N --local commit,rollback,unknown --check commit|rollback|unknown
//	                [--linger-ms L --until-checks K] TransactionProducer: local transaction answers
//	                cycled from --local; each check answers --check ("check" events); the producer
//	                stays up --linger-ms, or until K checks came and a second passed without one.
//	admin-create-topic --broker ADDR --queues Q
//	admin-delete-topic [--broker ADDR]
//	route           the topic's publish queues as the Go client sees them (GET_ROUTEINFO_BY_TOPIC)
//	request         --count N --create-topic Q --broker ADDR: a replier (push consumer in --group
//	                answering with consumer.CreateReplyMessage, SEND_REPLY_MESSAGE 324) and a
//	                requester: N Producer.Request (sync), then N RequestAsync; events reply,
//	                request_failed, replied, reply_failed
//
// ACL 1.0: --access-key AK --secret-key SK make every client of the scenario sign its requests
// (primitive.Credentials: the producer, push and pull consumers, admin).
//
// Messages: body "<topic or --body-prefix>-<i>", keys "k-<i>", user property seq=<i>, tags
// cycled from --tags. Events, one JSON object per line on stdout: sent, send_failed, batch,
// recv, pull, rebalance, balanced, route, created, deleted, summary, error, exit. Go client logs
// go to stderr at level error (ROCKETMQ_GO_LOG_LEVEL overrides).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/admin"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// ---------------------------------------------------------------------------------- events

var outMu sync.Mutex

type event map[string]any

func emit(ev string, fields event) {
	fields["ev"] = ev
	line, err := json.Marshal(fields)
	if err != nil {
		line = []byte(fmt.Sprintf(`{"ev":"error","error":%q}`, "cannot encode event: "+err.Error()))
	}
	outMu.Lock()
	defer outMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

func fail(err error) {
	emit("error", event{"error": err.Error()})
	emit("exit", event{"rc": 1})
	os.Exit(1)
}

// ---------------------------------------------------------------------------------- options

type options struct {
	namesrv     string
	topic       string
	group       string
	count       int
	tags        string
	tagExpr     string
	sqlExpr     string
	sqlProps    int
	bodyPrefix  string
	batchSize   int
	consumers   int
	produce     int
	createTopic int
	broker      string
	queues      int
	mode        string
	first       int
	bodySize    int
	orderly     bool
	retryFirst  bool
	idleMs      int
	deadlineMs  int
	accessKey   string
	secretKey   string
	local       string
	check       string
	lingerMs    int
	untilChecks int
}

// credentials is the ACL identity of --access-key / --secret-key; ok is false without one.
func (o *options) credentials() (c primitive.Credentials, ok bool) {
	return primitive.Credentials{AccessKey: o.accessKey, SecretKey: o.secretKey}, o.accessKey != ""
}

func producerOptions(o *options, opts ...producer.Option) []producer.Option {
	if c, ok := o.credentials(); ok {
		opts = append(opts, producer.WithCredentials(c))
	}
	return opts
}

func consumerOptions(o *options, opts ...consumer.Option) []consumer.Option {
	if c, ok := o.credentials(); ok {
		opts = append(opts, consumer.WithCredentials(c))
	}
	return opts
}

func parse(scenario string, args []string) *options {
	o := &options{}
	fs := flag.NewFlagSet(scenario, flag.ExitOnError)
	fs.StringVar(&o.namesrv, "namesrv", "", "NameServer address host:port")
	fs.StringVar(&o.topic, "topic", "", "topic")
	fs.StringVar(&o.group, "group", "", "producer or consumer group")
	fs.IntVar(&o.count, "count", 10, "messages to send / to expect")
	fs.StringVar(&o.tags, "tags", "TagA,TagB,TagC", "tags cycled over the sent messages (empty: none)")
	fs.StringVar(&o.tagExpr, "tag-expr", "*", "consumer subscription expression")
	fs.StringVar(&o.sqlExpr, "sql-expr", "", "push-consume: subscribe with this SQL92 selector instead of the tag expression")
	fs.IntVar(&o.sqlProps, "sql-props", 0, "message i carries a = i % 10 (absent when that is 9) and s = \"s\" + i % 3")
	fs.StringVar(&o.bodyPrefix, "body-prefix", "", "body prefix (default: the topic)")
	fs.IntVar(&o.batchSize, "batch-size", 8, "messages per batch (send-batch)")
	fs.IntVar(&o.consumers, "consumers", 1, "push consumers in the group (push-consume)")
	fs.IntVar(&o.produce, "produce", 0, "push-consume: send this many messages once balanced")
	fs.IntVar(&o.createTopic, "create-topic", 0, "push-consume: create the topic with this many queues first")
	fs.StringVar(&o.broker, "broker", "", "broker address host:port (admin)")
	fs.IntVar(&o.queues, "queues", 4, "read and write queue count (admin-create-topic)")
	fs.StringVar(&o.mode, "mode", "from", "pull-consume: from | poll")
	fs.IntVar(&o.first, "first", 0, "number of the first message sent (messages first .. first+count-1)")
	fs.IntVar(&o.bodySize, "body-size", 0, "pad bodies with '.' to this many bytes (the Go producer compresses over 4 KiB)")
	fs.BoolVar(&o.orderly, "orderly", false, "push-consume: orderly consumer (locks its queues at the broker)")
	fs.BoolVar(&o.retryFirst, "retry-first", false,
		"push-consume: fail every first delivery (ConsumeRetryLater, delay level 1 = 1 s) and accept the redelivery")
	fs.IntVar(&o.idleMs, "idle-ms", 1000, "after the expected messages, wait this long for extra ones")
	fs.IntVar(&o.deadlineMs, "deadline-ms", 90000, "give up (exit 3) after this long")
	fs.StringVar(&o.accessKey, "access-key", "", "ACL: sign requests with this AccessKey (and --secret-key)")
	fs.StringVar(&o.secretKey, "secret-key", "", "ACL: the account's SecretKey")
	fs.StringVar(&o.local, "local", "commit", "send-transaction: local transaction answers, cycled (commit,rollback,unknown)")
	fs.StringVar(&o.check, "check", "commit", "send-transaction: the check callback's answer (commit|rollback|unknown)")
	fs.IntVar(&o.lingerMs, "linger-ms", 0, "send-transaction: stay up this long after the sends to answer checks")
	fs.IntVar(&o.untilChecks, "until-checks", 0, "send-transaction: leave once this many checks came and 1 s passed")
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if o.namesrv == "" || o.topic == "" {
		fmt.Fprintln(os.Stderr, "--namesrv and --topic are required")
		os.Exit(2)
	}
	if o.bodyPrefix == "" {
		o.bodyPrefix = o.topic
	}
	return o
}

func (o *options) tagList() []string {
	if o.tags == "" {
		return []string{""}
	}
	return strings.Split(o.tags, ",")
}

// Every client in this process gets its own instance name (the Go client shares one client per
// ip@instance, and two consumers of one group must not share one).
var instanceSeq int64

func instanceName(role string) string {
	return fmt.Sprintf("go-%s-%d-%d", role, os.Getpid(), atomic.AddInt64(&instanceSeq, 1))
}

// ---------------------------------------------------------------------------------- messages

func message(o *options, i int) *primitive.Message {
	body := fmt.Sprintf("%s-%d", o.bodyPrefix, i)
	if len(body) < o.bodySize {
		body += strings.Repeat(".", o.bodySize-len(body))
	}
	m := primitive.NewMessage(o.topic, []byte(body))
	tags := o.tagList()
	if tag := tags[i%len(tags)]; tag != "" {
		m.WithTag(tag)
	}
	m.WithKeys([]string{fmt.Sprintf("k-%d", i)})
	m.WithProperty("seq", strconv.Itoa(i))
	if o.sqlProps != 0 {
		if i%10 != 9 {
			m.WithProperty("a", strconv.Itoa(i%10))
		}
		m.WithProperty("s", fmt.Sprintf("s%d", i%3))
	}
	return m
}

func sentEvent(m *primitive.Message, i int, status string) event {
	return event{"i": i, "body": string(m.Body), "tags": m.GetTags(), "keys": m.GetKeys(), "status": status}
}

func withResult(e event, r *primitive.SendResult) event {
	e["msgId"] = r.MsgID
	e["offsetMsgId"] = r.OffsetMsgID
	e["queueId"] = r.MessageQueue.QueueId
	e["brokerName"] = r.MessageQueue.BrokerName
	e["queueOffset"] = r.QueueOffset
	return e
}

func sendStatus(s primitive.SendStatus) string {
	switch s {
	case primitive.SendOK:
		return "SEND_OK"
	case primitive.SendFlushDiskTimeout:
		return "FLUSH_DISK_TIMEOUT"
	case primitive.SendFlushSlaveTimeout:
		return "FLUSH_SLAVE_TIMEOUT"
	case primitive.SendSlaveNotAvailable:
		return "SLAVE_NOT_AVAILABLE"
	}
	return fmt.Sprintf("UNKNOWN_%d", s)
}

func recvEvent(c int, m *primitive.MessageExt) event {
	return event{
		"c": c, "topic": m.Topic, "body": string(m.Body), "tags": m.GetTags(), "keys": m.GetKeys(),
		"seq": m.GetProperty("seq"), "msgId": m.MsgId, "offsetMsgId": m.OffsetMsgId,
		"uniqKey": m.GetProperty(primitive.PropertyUniqueClientMessageIdKeyIndex),
		"queueId": m.Queue.QueueId, "brokerName": m.Queue.BrokerName, "queueOffset": m.QueueOffset,
		"commitLogOffset": m.CommitLogOffset, "reconsumeTimes": m.ReconsumeTimes,
		"storeHost": m.StoreHost, "bornHost": m.BornHost, "sysFlag": m.SysFlag,
	}
}

// ---------------------------------------------------------------------------------- producing

func newProducer(o *options) rocketmq.Producer {
	group := o.group
	if group == "" {
		group = "GO_COMPAT_PRODUCER"
	}
	p, err := rocketmq.NewProducer(producerOptions(o,
		producer.WithNameServer([]string{o.namesrv}),
		producer.WithGroupName(group),
		producer.WithInstanceName(instanceName("producer")),
		producer.WithRetry(2),
	)...)
	if err != nil {
		fail(fmt.Errorf("new producer: %w", err))
	}
	if err := p.Start(); err != nil {
		fail(fmt.Errorf("start producer: %w", err))
	}
	return p
}

// send sends o.count messages numbered from 0 in the given mode and returns how many were
// acknowledged (oneway: handed to the connection).
func send(o *options, p rocketmq.Producer, mode string) (ok int, failed int) {
	ctx := context.Background()
	switch mode {
	case "sync":
		for i := o.first; i < o.first+o.count; i++ {
			m := message(o, i)
			r, err := p.SendSync(ctx, m)
			if err != nil {
				failed++
				emit("send_failed", event{"i": i, "error": err.Error()})
				continue
			}
			ok++
			emit("sent", withResult(sentEvent(m, i, sendStatus(r.Status)), r))
		}
	case "async":
		var wg sync.WaitGroup
		var okN, failedN int64
		for i := o.first; i < o.first+o.count; i++ {
			i, m := i, message(o, i)
			wg.Add(1)
			err := p.SendAsync(ctx, func(_ context.Context, r *primitive.SendResult, err error) {
				defer wg.Done()
				if err != nil || r == nil {
					atomic.AddInt64(&failedN, 1)
					emit("send_failed", event{"i": i, "error": fmt.Sprint(err)})
					return
				}
				atomic.AddInt64(&okN, 1)
				emit("sent", withResult(sentEvent(m, i, sendStatus(r.Status)), r))
			}, m)
			if err != nil {
				wg.Done()
				atomic.AddInt64(&failedN, 1)
				emit("send_failed", event{"i": i, "error": err.Error()})
			}
		}
		wg.Wait()
		ok, failed = int(okN), int(failedN)
	case "oneway":
		for i := o.first; i < o.first+o.count; i++ {
			m := message(o, i)
			if err := p.SendOneWay(ctx, m); err != nil {
				failed++
				emit("send_failed", event{"i": i, "error": err.Error()})
				continue
			}
			ok++
			emit("sent", sentEvent(m, i, "ONEWAY"))
		}
	case "batch":
		end := o.first + o.count
		for first := o.first; first < end; first += o.batchSize {
			n := o.batchSize
			if first+n > end {
				n = end - first
			}
			msgs := make([]*primitive.Message, n)
			for j := range msgs {
				msgs[j] = message(o, first+j)
			}
			r, err := p.SendSync(ctx, msgs...)
			if err != nil {
				failed += n
				emit("send_failed", event{"i": first, "n": n, "error": err.Error()})
				continue
			}
			ok += n
			// One result for the batch: the first entry's queue offset and the broker's msgId
			// header, which lists every entry's offset message id separated by commas.
			emit("batch", withResult(event{"first": first, "n": n, "status": sendStatus(r.Status)}, r))
			offsetIDs := strings.Split(r.OffsetMsgID, ",")
			for j, m := range msgs {
				e := withResult(sentEvent(m, first+j, sendStatus(r.Status)), r)
				e["queueOffset"] = r.QueueOffset + int64(j)
				e["batch"] = first
				if len(offsetIDs) == n {
					e["offsetMsgId"] = offsetIDs[j]
				}
				emit("sent", e)
			}
		}
	default:
		fail(fmt.Errorf("unknown send mode %q", mode))
	}
	return ok, failed
}

func runSend(o *options, mode string) {
	p := newProducer(o)
	ok, failed := send(o, p, mode)
	if mode == "oneway" {
		// Oneway frames are written asynchronously; give them time to leave before the exit.
		time.Sleep(500 * time.Millisecond)
	}
	shutdown("producer", p.Shutdown)
	emit("summary", event{"mode": mode, "count": o.count, "ok": ok, "failed": failed})
}

// shutdown runs a client's Shutdown, bounded: a stuck shutdown must not hang the scenario.
func shutdown(what string, f func() error) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s shutdown: %v\n", what, err)
		}
	case <-time.After(5 * time.Second):
		fmt.Fprintf(os.Stderr, "%s shutdown did not finish in 5 s\n", what)
	}
}

// ---------------------------------------------------------------------------------- admin

func newAdmin(o *options) admin.Admin {
	adminOpts := []admin.AdminOption{admin.WithResolver(primitive.NewPassthroughResolver([]string{o.namesrv}))}
	if c, ok := o.credentials(); ok {
		adminOpts = append(adminOpts, admin.WithCredentials(c))
	}
	a, err := admin.NewAdmin(adminOpts...)
	if err != nil {
		fail(fmt.Errorf("new admin: %w", err))
	}
	return a
}

func routeQueues(o *options, a admin.Admin) ([]*primitive.MessageQueue, error) {
	mqs, err := a.FetchPublishMessageQueues(context.Background(), o.topic)
	if err != nil {
		return nil, err
	}
	sort.Slice(mqs, func(i, j int) bool {
		if mqs[i].BrokerName != mqs[j].BrokerName {
			return mqs[i].BrokerName < mqs[j].BrokerName
		}
		return mqs[i].QueueId < mqs[j].QueueId
	})
	return mqs, nil
}

func queueEvent(mqs []*primitive.MessageQueue) []event {
	out := make([]event, 0, len(mqs))
	for _, mq := range mqs {
		out = append(out, event{"brokerName": mq.BrokerName, "queueId": mq.QueueId})
	}
	return out
}

// waitRoute polls the NameServer (a fresh admin client each time: the Go client caches routes)
// until the topic has a route, and returns its queues.
func waitRoute(o *options, timeout time.Duration) []*primitive.MessageQueue {
	deadline := time.Now().Add(timeout)
	for {
		a := newAdmin(o)
		mqs, err := routeQueues(o, a)
		a.Close()
		if err == nil && len(mqs) > 0 {
			return mqs
		}
		if time.Now().After(deadline) {
			fail(fmt.Errorf("no route for %s after %s: %v", o.topic, timeout, err))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func createTopic(o *options, queues int) {
	if o.broker == "" {
		fail(errors.New("--broker is required to create a topic"))
	}
	a := newAdmin(o)
	defer a.Close()
	err := a.CreateTopic(context.Background(),
		admin.WithTopicCreate(o.topic),
		admin.WithBrokerAddrCreate(o.broker),
		admin.WithReadQueueNums(queues),
		admin.WithWriteQueueNums(queues),
	)
	if err != nil {
		fail(fmt.Errorf("create topic: %w", err))
	}
	emit("created", event{"topic": o.topic, "broker": o.broker, "queues": queues})
}

func runAdminCreateTopic(o *options) {
	createTopic(o, o.queues)
	mqs := waitRoute(o, 30*time.Second)
	emit("route", event{"topic": o.topic, "queues": queueEvent(mqs)})
	emit("summary", event{"queues": len(mqs)})
}

func runAdminDeleteTopic(o *options) {
	a := newAdmin(o)
	defer a.Close()
	opts := []admin.OptionDelete{admin.WithTopicDelete(o.topic)}
	if o.broker != "" {
		opts = append(opts, admin.WithBrokerAddrDelete(o.broker))
	}
	if err := a.DeleteTopic(context.Background(), opts...); err != nil {
		fail(fmt.Errorf("delete topic: %w", err))
	}
	emit("deleted", event{"topic": o.topic})
	emit("summary", event{"deleted": true})
}

func runRoute(o *options) {
	a := newAdmin(o)
	defer a.Close()
	mqs, err := routeQueues(o, a)
	if err != nil {
		emit("route", event{"topic": o.topic, "error": err.Error(), "queues": []event{}})
		emit("summary", event{"found": false})
		return
	}
	emit("route", event{"topic": o.topic, "queues": queueEvent(mqs)})
	emit("summary", event{"found": true, "queues": len(mqs)})
}

// ---------------------------------------------------------------------------------- consuming

// received counts deliveries and remembers when the last one came.
type received struct {
	n    int64
	last atomic.Int64 // unix nanos
}

func (r *received) add(k int) {
	atomic.AddInt64(&r.n, int64(k))
	r.last.Store(time.Now().UnixNano())
}

func (r *received) count() int { return int(atomic.LoadInt64(&r.n)) }

// waitAll waits until want messages came and then idle ms passed without another one.
func (r *received) waitAll(want int, idle time.Duration, deadline time.Time) bool {
	for time.Now().Before(deadline) {
		if r.count() >= want && time.Since(time.Unix(0, r.last.Load())) >= idle {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// assignments records what the allocation strategy gave each consumer for the topic.
type assignments struct {
	mu      sync.Mutex
	topic   string
	queues  map[int][]int // consumer -> queue ids
	members map[int]int   // consumer -> number of consumers the allocation saw
}

func (a *assignments) strategy(c int) consumer.AllocateStrategy {
	return func(group, cid string, mqAll []*primitive.MessageQueue, cidAll []string) []*primitive.MessageQueue {
		mine := consumer.AllocateByAveragely(group, cid, mqAll, cidAll)
		if len(mqAll) == 0 || mqAll[0].Topic != a.topic {
			return mine
		}
		ids := make([]int, 0, len(mine))
		for _, mq := range mine {
			ids = append(ids, mq.QueueId)
		}
		sort.Ints(ids)
		a.mu.Lock()
		changed := fmt.Sprint(a.queues[c]) != fmt.Sprint(ids) || a.members[c] != len(cidAll)
		a.queues[c], a.members[c] = ids, len(cidAll)
		a.mu.Unlock()
		if changed {
			emit("rebalance", event{"c": c, "cid": cid, "cids": len(cidAll), "queues": ids})
		}
		return mine
	}
}

// balanced: every consumer's last allocation saw all k consumers, the parts are disjoint,
// non-empty and cover all queues.
func (a *assignments) balanced(k, queues int) ([][]int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[int]bool{}
	out := make([][]int, k)
	for c := 0; c < k; c++ {
		if a.members[c] != k || len(a.queues[c]) == 0 {
			return nil, false
		}
		for _, q := range a.queues[c] {
			if seen[q] {
				return nil, false
			}
			seen[q] = true
		}
		out[c] = a.queues[c]
	}
	return out, len(seen) == queues
}

func runPushConsume(o *options, deadline time.Time) {
	if o.createTopic > 0 {
		createTopic(o, o.createTopic)
	}
	queues := len(waitRoute(o, 30*time.Second))

	if o.retryFirst {
		prepareRetryTopic(o)
	}
	got := &received{}
	asg := &assignments{topic: o.topic, queues: map[int][]int{}, members: map[int]int{}}
	var consumers []rocketmq.PushConsumer
	for c := 0; c < o.consumers; c++ {
		c := c
		pc, err := rocketmq.NewPushConsumer(consumerOptions(o,
			consumer.WithNameServer([]string{o.namesrv}),
			consumer.WithGroupName(o.group),
			consumer.WithInstance(instanceName("consumer")),
			consumer.WithConsumerModel(consumer.Clustering),
			consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
			consumer.WithStrategy(asg.strategy(c)),
			consumer.WithConsumerOrder(o.orderly),
		)...)
		if err != nil {
			fail(fmt.Errorf("new push consumer %d: %w", c, err))
		}
		selector := consumer.MessageSelector{Type: consumer.TAG, Expression: o.tagExpr}
		if o.sqlExpr != "" {
			selector = consumer.MessageSelector{Type: consumer.SQL92, Expression: o.sqlExpr}
		}
		err = pc.Subscribe(o.topic, selector,
			func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				retry := false
				for _, m := range msgs {
					e := recvEvent(c, m)
					e["retryTopic"] = m.GetProperty(primitive.PropertyRetryTopic)
					emit("recv", e)
					retry = retry || (o.retryFirst && m.ReconsumeTimes == 0)
				}
				got.add(len(msgs))
				if retry {
					// CONSUMER_SEND_MSG_BACK (36) with delay level 1: redelivered from %RETRY%<group>.
					if cc, ok := primitive.GetConcurrentlyCtx(ctx); ok {
						cc.DelayLevelWhenNextConsume = 1
					}
					return consumer.ConsumeRetryLater, nil
				}
				return consumer.ConsumeSuccess, nil
			})
		if err != nil {
			fail(fmt.Errorf("subscribe %d: %w", c, err))
		}
		if err := pc.Start(); err != nil {
			fail(fmt.Errorf("start push consumer %d: %w", c, err))
		}
		consumers = append(consumers, pc)
	}

	want := o.count
	if o.retryFirst {
		want = 2 * o.count
	}
	if o.produce > 0 {
		var assignment [][]int
		for {
			if a, ok := asg.balanced(o.consumers, queues); ok {
				assignment = a
				break
			}
			if time.Now().After(deadline) {
				fail(errors.New("consumers never split the queues"))
			}
			time.Sleep(50 * time.Millisecond)
		}
		emit("balanced", event{"assignment": assignment})
		// Queues a consumer gave up are dropped after the allocation returns; let that settle.
		time.Sleep(time.Second)
		po := *o
		po.count = o.produce
		po.group = o.group + "_producer"
		p := newProducer(&po)
		ok, failed := send(&po, p, "sync")
		shutdown("producer", p.Shutdown)
		if failed > 0 {
			fail(fmt.Errorf("%d of %d sends failed", failed, o.produce))
		}
		want = ok
		if o.retryFirst {
			want = 2 * ok
		}
	}

	complete := got.waitAll(want, time.Duration(o.idleMs)*time.Millisecond, deadline)
	// Commit the consumed offsets as the client's own 5 s task does (UPDATE_CONSUMER_OFFSET,
	// oneway) while the connections are open. Shutdown commits once more, but closes the
	// connections right after those oneway writes, and a broker may not read them all (Apache
	// 4.9.7 sometimes loses the last ones).
	for _, pc := range consumers {
		if p, ok := pc.(interface{ PersistConsumerOffset() error }); ok {
			if err := p.PersistConsumerOffset(); err != nil {
				fmt.Fprintf(os.Stderr, "persist offsets: %v\n", err)
			}
		}
	}
	time.Sleep(500 * time.Millisecond)
	for _, pc := range consumers {
		shutdown("push consumer", pc.Shutdown)
	}
	emit("summary", event{"received": got.count(), "expected": want, "complete": complete && got.count() == want})
}

// prepareRetryTopic makes the broker create %RETRY%<group> before the real consumer starts: the
// broker creates it on a consumer's heartbeat, but a Go consumer reads its routes at start and then
// only every 30 s, so it would not pull redeliveries for up to 30 s. A consumer of the group that
// is allocated no queue (it pulls and commits nothing) sends the heartbeat and is shut down.
func prepareRetryTopic(o *options) {
	none := func(string, string, []*primitive.MessageQueue, []string) []*primitive.MessageQueue {
		return nil
	}
	pc, err := rocketmq.NewPushConsumer(consumerOptions(o,
		consumer.WithNameServer([]string{o.namesrv}),
		consumer.WithGroupName(o.group),
		consumer.WithInstance(instanceName("warmup")),
		consumer.WithStrategy(none),
	)...)
	if err != nil {
		fail(fmt.Errorf("new warm-up consumer: %w", err))
	}
	err = pc.Subscribe(o.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: o.tagExpr},
		func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			return consumer.ConsumeRetryLater, nil
		})
	if err != nil {
		fail(fmt.Errorf("subscribe warm-up consumer: %w", err))
	}
	if err := pc.Start(); err != nil {
		fail(fmt.Errorf("start warm-up consumer: %w", err))
	}
	retry := *o
	retry.topic = "%RETRY%" + o.group
	waitRoute(&retry, 30*time.Second)
	shutdown("warm-up consumer", pc.Shutdown)
	emit("retry_topic", event{"topic": retry.topic})
}

func pullStatus(s primitive.PullStatus) string {
	switch s {
	case primitive.PullFound:
		return "FOUND"
	case primitive.PullNoNewMsg:
		return "NO_NEW_MSG"
	case primitive.PullNoMsgMatched:
		return "NO_MATCHED_MSG"
	case primitive.PullOffsetIllegal:
		return "OFFSET_ILLEGAL"
	case primitive.PullBrokerTimeout:
		return "BROKER_TIMEOUT"
	}
	return fmt.Sprintf("UNKNOWN_%d", s)
}

func newPullConsumer(o *options) rocketmq.PullConsumer {
	pc, err := rocketmq.NewPullConsumer(consumerOptions(o,
		consumer.WithNameServer([]string{o.namesrv}),
		consumer.WithGroupName(o.group),
		consumer.WithInstance(instanceName("pull")),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)...)
	if err != nil {
		fail(fmt.Errorf("new pull consumer: %w", err))
	}
	if err := pc.Subscribe(o.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: o.tagExpr}); err != nil {
		fail(fmt.Errorf("subscribe: %w", err))
	}
	if err := pc.Start(); err != nil {
		fail(fmt.Errorf("start pull consumer: %w", err))
	}
	return pc
}

// runPullFrom reads every queue from offset 0. The Go client pulls with the suspend flag and a
// 20 s suspend time, so a pull at a queue's end would be parked; each queue is therefore read
// until a result's nextBeginOffset reaches the maxOffset the broker reported.
func runPullFrom(o *options, deadline time.Time) {
	mqs := waitRoute(o, 30*time.Second)
	pc := newPullConsumer(o)
	var wg sync.WaitGroup
	var total int64
	errs := make(chan error, len(mqs))
	for _, mq := range mqs {
		mq := mq
		wg.Add(1)
		go func() {
			defer wg.Done()
			offset := int64(0)
			for time.Now().Before(deadline) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				r, err := pc.PullFrom(ctx, mq, offset, 32)
				cancel()
				if err != nil {
					errs <- fmt.Errorf("pull %s at %d: %w", mq, offset, err)
					return
				}
				msgs := r.GetMessageExts()
				emit("pull", event{"queueId": mq.QueueId, "offset": offset, "status": pullStatus(r.Status),
					"nextBeginOffset": r.NextBeginOffset, "minOffset": r.MinOffset, "maxOffset": r.MaxOffset,
					"n": len(msgs)})
				for _, m := range msgs {
					emit("recv", recvEvent(0, m))
				}
				atomic.AddInt64(&total, int64(len(msgs)))
				switch r.Status {
				case primitive.PullFound, primitive.PullNoMsgMatched:
				default:
					return
				}
				offset = r.NextBeginOffset
				if offset >= r.MaxOffset {
					return
				}
			}
			errs <- fmt.Errorf("deadline while pulling %s", mq)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fail(err)
	}
	shutdown("pull consumer", pc.Shutdown)
	emit("summary", event{"received": total, "queues": len(mqs)})
}

// runPoll consumes with the pull consumer's Poll/ACK (it rebalances and pulls in the background).
func runPoll(o *options, deadline time.Time) {
	waitRoute(o, 30*time.Second)
	pc := newPullConsumer(o)
	got := &received{}
	got.last.Store(time.Now().UnixNano())
	idle := time.Duration(o.idleMs) * time.Millisecond
	for time.Now().Before(deadline) {
		if got.count() >= o.count && time.Since(time.Unix(0, got.last.Load())) >= idle {
			break
		}
		cr, err := pc.Poll(context.Background(), 200*time.Millisecond)
		if err != nil {
			if consumer.IsNoNewMsgError(err) {
				continue
			}
			fail(fmt.Errorf("poll: %w", err))
		}
		for _, m := range cr.GetMsgList() {
			emit("recv", recvEvent(0, m))
		}
		got.add(len(cr.GetMsgList()))
		pc.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	shutdown("pull consumer", pc.Shutdown)
	emit("summary", event{"received": got.count(), "expected": o.count, "complete": got.count() == o.count})
}

// ---------------------------------------------------------------------------------- request/reply

func runRequest(o *options) {
	createTopic(o, o.createTopic)
	waitRoute(o, 30*time.Second)
	replyOpts := *o
	replyOpts.group = "PG_reply_" + o.group
	replier := newProducer(&replyOpts)
	var replied int64 // replies the replier's SendSync acknowledged
	pc, err := rocketmq.NewPushConsumer(consumerOptions(o,
		consumer.WithNameServer([]string{o.namesrv}),
		consumer.WithGroupName(o.group),
		consumer.WithInstance(instanceName("replier")),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)...)
	if err != nil {
		fail(fmt.Errorf("new push consumer: %w", err))
	}
	err = pc.Subscribe(o.topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"},
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				body := []byte("reply:" + string(m.Body))
				reply, err := consumer.CreateReplyMessage(m, body)
				if err == nil {
					// v2.1.2's CreateReplyMessage parses the body as properties and leaves the
					// reply's body empty; set it as the function's contract says.
					reply.Body = body
					var r *primitive.SendResult
					// The first request can reach the replier before the requester's first
					// heartbeat reaches the broker (on Apache as on pyrmq): the broker then
					// answers "channel of <id> not found". Retried after a second, as the Go
					// client's own rpc example waits a second before replying.
					for attempt := 0; attempt < 5; attempt++ {
						if r, err = replier.SendSync(context.Background(), reply); err == nil ||
							!strings.Contains(err.Error(), "not found") {
							break
						}
						emit("reply_retry", event{"body": string(m.Body), "error": err.Error()})
						time.Sleep(time.Second)
					}
					if err == nil {
						emit("replied", event{"body": string(m.Body), "topic": reply.Topic, "status": sendStatus(r.Status)})
						atomic.AddInt64(&replied, 1)
						continue
					}
				}
				emit("reply_failed", event{"body": string(m.Body), "error": err.Error()})
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		fail(fmt.Errorf("subscribe: %w", err))
	}
	if err := pc.Start(); err != nil {
		fail(fmt.Errorf("start push consumer: %w", err))
	}
	// No send before the first request: a request to a topic whose route the client does not know
	// yet fetches it and heartbeats to its brokers, so the broker can push the reply to this client;
	// once the route is known only the periodic (30 s) heartbeat would register it.
	requester := newProducer(o)
	timeout := 10 * time.Second
	ok, failed := 0, 0
	for i := 0; i < o.count; i++ {
		m := message(o, i)
		start := time.Now()
		reply, err := requester.Request(context.Background(), timeout, m)
		if err != nil {
			emit("request_failed", event{"i": i, "mode": "sync", "error": err.Error()})
			failed++
			continue
		}
		emit("reply", event{"i": i, "mode": "sync", "request": string(m.Body), "body": string(reply.Body),
			"topic": reply.Topic, "correlationId": reply.GetProperty(primitive.PropertyCorrelationID),
			"ms": time.Since(start).Milliseconds()})
		ok++
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := o.count; i < 2*o.count; i++ {
		i, m, start := i, message(o, i), time.Now()
		wg.Add(1)
		var once sync.Once
		err := requester.RequestAsync(context.Background(), timeout, func(ctx context.Context, reply *primitive.Message, err error) {
			// v2.1.2 runs the callback again when it drops the answered request from its cache.
			first := false
			once.Do(func() { first = true })
			if !first {
				return
			}
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				emit("request_failed", event{"i": i, "mode": "async", "error": err.Error()})
				failed++
				return
			}
			emit("reply", event{"i": i, "mode": "async", "request": string(m.Body), "body": string(reply.Body),
				"topic": reply.Topic, "correlationId": reply.GetProperty(primitive.PropertyCorrelationID),
				"ms": time.Since(start).Milliseconds()})
			ok++
		}, m)
		if err != nil {
			wg.Done()
			mu.Lock()
			emit("request_failed", event{"i": i, "mode": "async", "error": err.Error()})
			failed++
			mu.Unlock()
		}
	}
	wg.Wait()
	// The requester can hold a reply before the replier's send of it has returned (the broker
	// pushes first, then answers the replier): wait for those answers before shutting down.
	for end := time.Now().Add(5 * time.Second); atomic.LoadInt64(&replied) < int64(ok) && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
	}
	shutdown("requester", requester.Shutdown)
	shutdown("push consumer", pc.Shutdown)
	shutdown("replier", replier.Shutdown)
	mu.Lock()
	emit("summary", event{"ok": ok, "failed": failed})
	mu.Unlock()
}

// ---------------------------------------------------------------------------------- main

func main() {
	if os.Getenv("ROCKETMQ_GO_LOG_LEVEL") == "" {
		rlog.SetLogLevel("error")
	}
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: go-scenarios SCENARIO --namesrv HOST:PORT --topic T [options]")
		os.Exit(2)
	}
	scenario := os.Args[1]
	o := parse(scenario, os.Args[2:])
	deadline := time.Now().Add(time.Duration(o.deadlineMs) * time.Millisecond)
	go func() {
		time.Sleep(time.Until(deadline) + 5*time.Second)
		emit("error", event{"error": fmt.Sprintf("deadline of %d ms exceeded", o.deadlineMs)})
		emit("exit", event{"rc": 3})
		os.Exit(3)
	}()

	switch scenario {
	case "send-sync", "send-async", "send-oneway", "send-batch":
		runSend(o, strings.TrimPrefix(scenario, "send-"))
	case "push-consume":
		runPushConsume(o, deadline)
	case "pull-consume":
		switch o.mode {
		case "from":
			runPullFrom(o, deadline)
		case "poll":
			runPoll(o, deadline)
		default:
			fail(fmt.Errorf("unknown pull mode %q", o.mode))
		}
	case "send-transaction":
		runTransaction(o)
	case "admin-create-topic":
		runAdminCreateTopic(o)
	case "admin-delete-topic":
		runAdminDeleteTopic(o)
	case "route":
		runRoute(o)
	case "request":
		runRequest(o)
	default:
		fmt.Fprintf(os.Stderr, "unknown scenario %q\n", scenario)
		os.Exit(2)
	}
	emit("exit", event{"rc": 0})
	os.Exit(0)
}

// ---------------------------------------------------------------------------------- transactions

func txState(name string) primitive.LocalTransactionState {
	switch name {
	case "commit":
		return primitive.CommitMessageState
	case "rollback":
		return primitive.RollbackMessageState
	case "unknown":
		return primitive.UnknowState
	}
	fail(fmt.Errorf("unknown transaction state %q", name))
	return primitive.UnknowState
}

func txStateName(s primitive.LocalTransactionState) string {
	switch s {
	case primitive.CommitMessageState:
		return "COMMIT_MESSAGE"
	case primitive.RollbackMessageState:
		return "ROLLBACK_MESSAGE"
	}
	return "UNKNOW"
}

type txListener struct {
	local  []primitive.LocalTransactionState
	answer primitive.LocalTransactionState
	checks int64
}

func (l *txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	i, _ := strconv.Atoi(m.GetProperty("seq"))
	return l.local[i%len(l.local)]
}

func (l *txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	atomic.AddInt64(&l.checks, 1)
	emit("check", event{"body": string(m.Body), "topic": m.Topic, "queueId": m.Queue.QueueId,
		"transactionId": m.TransactionId, "checkTimes": m.GetProperty("TRANSACTION_CHECK_TIMES"),
		"answer": txStateName(l.answer)})
	return l.answer
}

func runTransaction(o *options) {
	l := &txListener{answer: txState(o.check)}
	for _, name := range strings.Split(o.local, ",") {
		l.local = append(l.local, txState(name))
	}
	group := o.group
	if group == "" {
		group = "PG_" + o.topic
	}
	p, err := rocketmq.NewTransactionProducer(l, producerOptions(o,
		producer.WithNameServer([]string{o.namesrv}),
		producer.WithGroupName(group),
		producer.WithInstanceName(instanceName("tx-producer")),
		producer.WithRetry(2),
	)...)
	if err != nil {
		fail(fmt.Errorf("new transaction producer: %w", err))
	}
	if err := p.Start(); err != nil {
		fail(fmt.Errorf("start transaction producer: %w", err))
	}
	for i := o.first; i < o.first+o.count; i++ {
		m := message(o, i)
		r, err := p.SendMessageInTransaction(context.Background(), m)
		if err != nil {
			emit("send_failed", event{"i": i, "error": err.Error()})
			continue
		}
		e := withResult(sentEvent(m, i, sendStatus(r.Status)), r.SendResult)
		e["localState"] = txStateName(r.State)
		emit("sent", e)
	}
	end := time.Now().Add(time.Duration(o.lingerMs) * time.Millisecond)
	seen, quietSince := atomic.LoadInt64(&l.checks), time.Now()
	for time.Now().Before(end) {
		time.Sleep(100 * time.Millisecond)
		if now := atomic.LoadInt64(&l.checks); now != seen {
			seen, quietSince = now, time.Now()
		}
		if o.untilChecks > 0 && seen >= int64(o.untilChecks) && time.Since(quietSince) >= time.Second {
			break
		}
	}
	shutdown("transaction producer", p.Shutdown)
}
