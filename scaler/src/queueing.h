#pragma once
// Queueing bounds for sizing a fleet to a latency SLO. A replica with chunked prefill serves
// prompts FCFS at its prefill rate, and the gateway sends each request to the least busy
// replica, so the fleet is close to an M/M/c queue of prefill work: c replicas, offered load
// a (in replicas), mean service time x. The M/M/c waiting time is 0 with probability 1 - C
// and exponential with rate (c - a) / x otherwise (C = Erlang C); a request's TTFT is that
// wait plus its own prefill, taken as exponential with mean x.
namespace tidegate::scaler::queueing {

// Erlang C: probability that an arrival waits, for c servers and offered load a (< c).
double erlang_c(int c, double a);

// Share of requests whose wait + own service exceeds s (in units of the mean service time)
// that would not exceed it without the wait: what queueing adds to the misses. `cv2` is the
// service time's squared coefficient of variation: M/G/c waits are about (1 + cv2) / 2 times
// the M/M/c ones (the Allen-Cunneen approximation), so the wait's decay slows by that factor.
double queueing_misses(int c, double a, double s, double cv2 = 1);

// Smallest c > a such that queueing_misses(c, a, s, cv2) <= eps, at most max_c. 0 when a <= 0.
int servers_for(double a, double s, double eps, int max_c, double cv2 = 1);

// Smallest c > a whose queueing misses among `arrivals` requests fit `spare` of them, or the
// servers_for(eps) fleet if that is smaller: a stretch's misses paid from a budget counted in
// requests (an SLO window's unused part), not a share of each moment's. At most max_c.
int servers_within(double a, double s, double eps, double arrivals, double spare, int max_c, double cv2 = 1);

}  // namespace tidegate::scaler::queueing
