#pragma once
// Prices every request and enforces budgets: a hard budget refuses before forwarding; each
// attempt on a replica is a ledger request that shares the replica's time by token work; the
// cost is reported in x-tidegate-cost-usd (non-stream) or on the final usage chunk (stream).
#include <functional>
#include <memory>

#include "audit_transport.h"
#include "tidegate/cost/accounting.h"
#include "tidegate/gateway/gateway.h"

namespace tidegate::app {

class CostFilter final : public gateway::RequestFilter {
 public:
  // `clock` returns Unix seconds (budgets have UTC day/month periods).
  // Requests `audit_mark` marks are the cache's audits: audit cost, outside every budget.
  CostFilter(std::shared_ptr<cost::CostAccounting> accounting, std::function<double()> clock,
             std::shared_ptr<const AuditMark> audit_mark = nullptr)
      : accounting_(std::move(accounting)), clock_(std::move(clock)), audit_mark_(std::move(audit_mark)) {}
  // Copies the client's headers into the context: the audit mark is a header.
  bool reads_request_headers() const override { return audit_mark_ != nullptr; }

  void pre_forward(const std::shared_ptr<gateway::RequestContext>& ctx, Done done) override;
  bool reads_request_body() const override { return false; }  // prices from ctx's token counts
  void on_attempt_start(gateway::RequestContext& ctx) override;
  void on_attempt_end(gateway::RequestContext& ctx, bool success) override;
  void on_stream_event(gateway::RequestContext& ctx, boost::json::object* usage_chunk) override;
  void on_response_headers(gateway::RequestContext& ctx) override;
  void on_complete(const gateway::RequestContext& ctx) override;

  // Charges a cache hit (cache lookup price, savings) once per request and returns its cost.
  // The cache filter calls it before rendering a streamed hit; on_response_headers otherwise.
  double price_hit(gateway::RequestContext& ctx);

 private:
  struct State;
  static State& state(gateway::RequestContext& ctx);
  static State* find_state(const gateway::RequestContext& ctx);
  // Closes the open ledger request, if any, and adds its cost to the request's total.
  void settle(const gateway::RequestContext& ctx, State& s);
  void report_progress(const gateway::RequestContext& ctx, const State& s, double now);

  cost::RequestLabels labels(const gateway::RequestContext& ctx) const;

  std::shared_ptr<cost::CostAccounting> accounting_;
  std::function<double()> clock_;
  std::shared_ptr<const AuditMark> audit_mark_;
};

cost::RequestLabels labels_of(const gateway::RequestContext& ctx);

}  // namespace tidegate::app
