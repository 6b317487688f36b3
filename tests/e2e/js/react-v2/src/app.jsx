import React from "react";
import { createRoot } from "react-dom/client";
import { CopilotKitProvider, CopilotChat } from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";

const runtimeUrl = new URLSearchParams(window.location.search).get("runtime");
createRoot(document.getElementById("root")).render(
  <CopilotKitProvider runtimeUrl={runtimeUrl}>
    <CopilotChat />
  </CopilotKitProvider>
);
